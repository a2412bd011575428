//! How many classes a run's labels stand for when the run does not say. Labels are taken
//! as the classes `0..k` only when that is plausible: at least two classes, none missing
//! in between, at most [`MAX_INFERRED_CLASSES`]. Otherwise one stray label (a 200 among
//! digits) would silently build a network for another task. Stating the classes in the run
//! file is the way past these checks.

use std::collections::BTreeSet;

/// The most classes a run takes from its labels alone.
pub const MAX_INFERRED_CLASSES: usize = 1000;

/// The class count that `labels` stand for, one more than the largest, or what makes that
/// implausible, ending with how to state the classes (`state`, e.g. "`classes = 10` in
/// [model]").
pub fn inferred_classes(
    labels: impl IntoIterator<Item = u64>,
    state: &str,
) -> Result<usize, String> {
    let distinct: BTreeSet<u64> = labels.into_iter().collect();
    let (Some(&first), Some(&largest)) = (distinct.first(), distinct.last()) else {
        return Err("there are no labels".into());
    };
    let classes = largest as usize + 1;
    if distinct.len() == 1 {
        return Err(format!(
            "every label is {first}: a classifier needs at least two classes"
        ));
    }
    if classes > MAX_INFERRED_CLASSES {
        return Err(format!(
            "the largest label is {largest}, which would make {classes} classes (more than \
             {MAX_INFERRED_CLASSES} are not taken from the labels alone): fix the label or \
             state the classes ({state})"
        ));
    }
    if distinct.len() < classes {
        let missing: Vec<String> = (0..largest)
            .filter(|label| !distinct.contains(label))
            .take(5)
            .map(|label| label.to_string())
            .collect();
        return Err(format!(
            "the labels run from 0 to {largest}, but {} of those {classes} classes never occur \
             (missing: {}{}): fix the labels or state the classes ({state})",
            classes - distinct.len(),
            missing.join(", "),
            if classes - distinct.len() > missing.len() {
                ", …"
            } else {
                ""
            }
        ));
    }
    Ok(classes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plausible_labels_give_their_count_others_say_why_not() {
        assert_eq!(inferred_classes([2, 0, 1, 1], "x"), Ok(3));
        let refused = |labels: &[u64]| inferred_classes(labels.iter().copied(), "S").unwrap_err();
        assert_eq!(refused(&[]), "there are no labels");
        assert!(refused(&[4, 4]).contains("every label is 4"));
        let gap = refused(&[0, 1, 2, 200]);
        assert!(
            gap.contains(
                "0 to 200, but 197 of those 201 classes never occur (missing: 3, 4, 5, \
                          6, 7, …)"
            ) && gap.ends_with("(S)"),
            "{gap}"
        );
        let many: Vec<u64> = (0..=1000).collect();
        assert!(refused(&many).contains("1001 classes"));
        assert_eq!(inferred_classes(0..1000, "x"), Ok(1000));
    }
}
