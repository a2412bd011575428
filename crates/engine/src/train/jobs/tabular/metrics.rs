//! Test-split metrics of a tabular run, computed in f64 on the host.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Errors of a regression, over every target column.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RegressionMetrics {
    pub mse: f64,
    pub rmse: f64,
    pub mae: f64,
    /// Coefficient of determination, 1 − SS_res / SS_tot, with each column's own mean.
    pub r2: f64,
}

impl RegressionMetrics {
    /// Compares row-major `predicted` and `actual` values with `width` columns.
    pub fn new(predicted: &[f32], actual: &[f32], width: usize) -> Self {
        assert_eq!(predicted.len(), actual.len(), "one prediction per value");
        let n = actual.len().max(1) as f64;
        let rows = (actual.len() / width.max(1)).max(1) as f64;
        let mut means = vec![0f64; width];
        for row in actual.chunks_exact(width) {
            for (m, &v) in means.iter_mut().zip(row) {
                *m += f64::from(v) / rows;
            }
        }
        let (mut sq, mut abs, mut total) = (0f64, 0f64, 0f64);
        for (i, (&p, &a)) in predicted.iter().zip(actual).enumerate() {
            let error = f64::from(p) - f64::from(a);
            sq += error * error;
            abs += error.abs();
            total += (f64::from(a) - means[i % width]).powi(2);
        }
        let mse = sq / n;
        Self {
            mse,
            rmse: mse.sqrt(),
            mae: abs / n,
            r2: if total > 0.0 {
                1.0 - sq / total
            } else {
                f64::NAN
            },
        }
    }
}

/// What the test split says about a trained model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "task", rename_all = "snake_case")]
pub enum TestMetrics {
    Regression(RegressionMetrics),
    /// Share (0 to 1) of rows whose class is predicted correctly.
    Classification {
        accuracy: f64,
    },
}

impl TestMetrics {
    /// Share of `predicted` classes equal to `actual`.
    pub fn classification(predicted: &[usize], actual: &[usize]) -> Self {
        let correct = predicted.iter().zip(actual).filter(|(p, a)| p == a).count();
        TestMetrics::Classification {
            accuracy: correct as f64 / actual.len().max(1) as f64,
        }
    }
}

/// `test mse 0.0123 rmse 0.1109 mae 0.0871 r2 0.9876` or `test accuracy: 99.25%`.
impl fmt::Display for TestMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TestMetrics::Regression(m) => write!(
                f,
                "test mse {:.6} rmse {:.6} mae {:.6} r2 {:.4}",
                m.mse, m.rmse, m.mae, m.r2
            ),
            TestMetrics::Classification { accuracy } => {
                write!(f, "test accuracy: {:.2}%", accuracy * 100.0)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regression_metrics_match_hand_computed_values() {
        // Errors 0.5, -1, 2 on targets 1, 2, 3 (mean 2, SS_tot 2).
        let m = RegressionMetrics::new(&[1.5, 1.0, 5.0], &[1.0, 2.0, 3.0], 1);
        assert!((m.mse - 5.25 / 3.0).abs() < 1e-12);
        assert!((m.rmse - (5.25f64 / 3.0).sqrt()).abs() < 1e-12);
        assert!((m.mae - 3.5 / 3.0).abs() < 1e-12);
        assert!((m.r2 - (1.0 - 5.25 / 2.0)).abs() < 1e-12);
        // Two columns, each with its own mean: a perfect fit has R² = 1.
        let m = RegressionMetrics::new(&[1.0, 10.0, 3.0, 30.0], &[1.0, 10.0, 3.0, 30.0], 2);
        assert_eq!((m.mse, m.mae, m.r2), (0.0, 0.0, 1.0));
        // Predicting each column's mean gives R² = 0.
        let m = RegressionMetrics::new(&[2.0, 20.0, 2.0, 20.0], &[1.0, 10.0, 3.0, 30.0], 2);
        assert!(m.r2.abs() < 1e-12);
    }

    #[test]
    fn accuracy_and_lines() {
        let m = TestMetrics::classification(&[1, 0, 2, 2], &[1, 1, 2, 2]);
        assert_eq!(m, TestMetrics::Classification { accuracy: 0.75 });
        assert_eq!(m.to_string(), "test accuracy: 75.00%");
        let r = TestMetrics::Regression(RegressionMetrics::new(&[1.5], &[1.0], 1));
        assert_eq!(
            r.to_string(),
            "test mse 0.250000 rmse 0.500000 mae 0.500000 r2 NaN"
        );
    }
}
