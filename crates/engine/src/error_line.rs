//! The one line a failed command prints: an error and its causes, each said once.

use std::error::Error;

/// `error: cause: cause …` with every cause not already part of the text before it. Errors
/// here name their cause in their own message (`cannot read x: No such file`) and also
/// expose it as their source, so printing the whole chain would repeat it.
pub fn error_line(error: &(dyn Error + 'static)) -> String {
    let mut line = error.to_string();
    let mut cause = error.source();
    while let Some(error) = cause {
        let text = error.to_string();
        if !line.contains(&text) {
            line = format!("{line}: {text}");
        }
        cause = error.source();
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot read data.csv: {0}")]
    struct Read(#[source] std::io::Error);

    #[derive(Debug, thiserror::Error)]
    #[error("the run failed")]
    struct Run(#[source] Read);

    #[test]
    fn each_cause_is_said_once() {
        let missing = || std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        assert_eq!(
            error_line(&Read(missing())),
            "cannot read data.csv: no such file"
        );
        assert_eq!(
            error_line(&Run(Read(missing()))),
            "the run failed: cannot read data.csv: no such file"
        );
        let context = anyhow::Error::new(Read(missing())).context("loading the table");
        assert_eq!(
            error_line(context.as_ref()),
            "loading the table: cannot read data.csv: no such file"
        );
    }
}
