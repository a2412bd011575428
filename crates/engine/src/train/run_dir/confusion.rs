//! How a classifier's predictions fall per true class: the confusion matrix, the per-class
//! accuracy derived from it, and their files in the artifact directory.

use std::fmt;

use super::RunDir;
use crate::atomic_file::{WriteError, write_atomically_with};
use crate::plot::{Heatmap, PlotError, plot_heatmap};

/// `counts[true class][predicted class]` over a set of images.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfusionMatrix {
    classes: Vec<String>,
    counts: Vec<Vec<u64>>,
}

impl ConfusionMatrix {
    /// An empty matrix over `classes`, in label order.
    pub fn new(classes: Vec<String>) -> Self {
        let n = classes.len();
        Self {
            classes,
            counts: vec![vec![0; n]; n],
        }
    }

    /// Counts the pairs of true and predicted labels (both below the class count).
    pub fn add(&mut self, targets: &[usize], predicted: &[usize]) {
        for (&target, &guess) in targets.iter().zip(predicted) {
            self.counts[target][guess] += 1;
        }
    }

    /// How many images of class `target` were predicted as `predicted`.
    pub fn count(&self, target: usize, predicted: usize) -> u64 {
        self.counts[target][predicted]
    }

    /// Images counted.
    pub fn total(&self) -> u64 {
        self.counts.iter().flatten().sum()
    }

    /// Share (0 to 1) of the images whose class was predicted; 0 for no images.
    pub fn accuracy(&self) -> f64 {
        let correct: u64 = (0..self.classes.len()).map(|c| self.counts[c][c]).sum();
        correct as f64 / self.total().max(1) as f64
    }

    /// Each class's name, image count and share of its images predicted as it (`None` for
    /// a class with no images).
    pub fn per_class(&self) -> impl Iterator<Item = (&str, u64, Option<f64>)> {
        self.classes
            .iter()
            .zip(&self.counts)
            .enumerate()
            .map(|(c, (name, row))| {
                let images: u64 = row.iter().sum();
                let accuracy = (images > 0).then(|| row[c] as f64 / images as f64);
                (name.as_str(), images, accuracy)
            })
    }

    /// Writes the figure and the per-class CSV into `dir`.
    pub fn save(&self, dir: &RunDir) -> Result<(), ConfusionError> {
        plot_heatmap(&dir.confusion_matrix(), &self.heatmap())?;
        write_atomically_with(&dir.per_class_accuracy(), |partial| {
            let mut csv = csv::Writer::from_path(partial)?;
            csv.write_record(["class", "images", "accuracy"])?;
            for (name, images, accuracy) in self.per_class() {
                let accuracy = accuracy.map_or(String::new(), |a| format!("{a:.6}"));
                csv.write_record([name, &images.to_string(), &accuracy])?;
            }
            csv.flush()
        })?;
        Ok(())
    }

    /// Rows shaded by the share of the true class's images, cells labelled with counts.
    fn heatmap(&self) -> Heatmap {
        let shade = self
            .counts
            .iter()
            .map(|row| {
                let images = row.iter().sum::<u64>().max(1) as f64;
                row.iter().map(|&n| n as f64 / images).collect()
            })
            .collect();
        let text = self
            .counts
            .iter()
            .map(|row| row.iter().map(u64::to_string).collect())
            .collect();
        Heatmap {
            title: format!(
                "Test set: {} images, {:.2}% correct",
                self.total(),
                self.accuracy() * 100.0
            ),
            row_title: "true class".into(),
            column_title: "predicted class".into(),
            row_labels: self.classes.clone(),
            column_labels: self.classes.clone(),
            shade,
            text,
        }
    }
}

/// The per-class table printed after a run: class, images, accuracy.
impl fmt::Display for ConfusionMatrix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let width = self
            .classes
            .iter()
            .map(String::len)
            .max()
            .unwrap_or(0)
            .max(5);
        writeln!(f, "{:<width$}  {:>7}  accuracy", "class", "images")?;
        for (name, images, accuracy) in self.per_class() {
            let accuracy = accuracy.map_or("-".to_string(), |a| format!("{:.2}%", a * 100.0));
            writeln!(f, "{name:<width$}  {images:>7}  {accuracy:>8}")?;
        }
        Ok(())
    }
}

/// The confusion matrix files could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ConfusionError {
    #[error(transparent)]
    Plot(#[from] PlotError),
    #[error(transparent)]
    Write(#[from] WriteError),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matrix() -> ConfusionMatrix {
        let mut m = ConfusionMatrix::new(vec!["cat".into(), "dog, big".into(), "owl".into()]);
        // cat: 3 right, 1 as dog; dog: 1 right, 1 as owl; owl: none.
        m.add(&[0, 0, 0, 0, 1, 1], &[0, 0, 1, 0, 1, 2]);
        m
    }

    #[test]
    fn counts_accuracy_and_per_class() {
        let m = matrix();
        assert_eq!((m.count(0, 1), m.count(1, 2), m.count(2, 2)), (1, 1, 0));
        assert_eq!(m.total(), 6);
        assert!((m.accuracy() - 4.0 / 6.0).abs() < 1e-12);
        let per_class: Vec<_> = m.per_class().collect();
        assert_eq!(
            per_class,
            [
                ("cat", 4, Some(0.75)),
                ("dog, big", 2, Some(0.5)),
                ("owl", 0, None)
            ]
        );
        assert_eq!(
            m.to_string(),
            "class      images  accuracy\n\
             cat             4    75.00%\n\
             dog, big        2    50.00%\n\
             owl             0         -\n"
        );
    }

    #[test]
    fn saves_a_png_and_a_csv() {
        let dir = tempfile::tempdir().unwrap();
        let run_dir = RunDir::open(dir.path());
        matrix().save(&run_dir).unwrap();
        let png = image::open(run_dir.confusion_matrix()).unwrap();
        assert!(png.width() > 200 && png.height() > 200);
        let csv = std::fs::read_to_string(run_dir.per_class_accuracy()).unwrap();
        assert_eq!(
            csv,
            "class,images,accuracy\ncat,4,0.750000\n\"dog, big\",2,0.500000\nowl,0,\n"
        );
    }
}
