//! Seeded train/validation/test splits of a table's rows, and the feature standardization
//! fitted on the training rows.

use std::fmt;
use std::str::FromStr;

use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};

use crate::data::Table;

/// Shares of the rows that go to training, validation and test, e.g. `0.7:0.15:0.15`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SplitRatios {
    pub train: f64,
    pub valid: f64,
    pub test: f64,
}

impl Default for SplitRatios {
    fn default() -> Self {
        Self {
            train: 0.7,
            valid: 0.15,
            test: 0.15,
        }
    }
}

impl SplitRatios {
    /// Row indices of the three splits: all rows shuffled with `seed`, then cut by the
    /// ratios (normalized to sum to 1). Each split with a positive ratio gets at least one
    /// row, so `rows` must be at least the number of positive ratios.
    pub fn split(&self, rows: usize, seed: u64) -> Result<[Vec<usize>; 3], String> {
        self.check()?;
        let ratios = [self.train, self.valid, self.test];
        let needed = ratios.iter().filter(|&&r| r > 0.0).count();
        if rows < needed {
            return Err(format!(
                "{rows} rows cannot fill the {needed} splits of {self}"
            ));
        }
        let total: f64 = ratios.iter().sum();
        let mut counts = ratios.map(|r| {
            let n = (r / total * rows as f64).round() as usize;
            if r > 0.0 { n.max(1) } else { 0 }
        });
        // Rounding may over- or under-shoot by a row or two; training absorbs it.
        counts[0] = rows - counts[1] - counts[2];
        let mut order: Vec<usize> = (0..rows).collect();
        order.shuffle(&mut StdRng::seed_from_u64(seed));
        let test = order.split_off(counts[0] + counts[1]);
        let valid = order.split_off(counts[0]);
        Ok([order, valid, test])
    }

    /// Training and validation must be non-empty; no ratio may be negative.
    fn check(&self) -> Result<(), String> {
        let ratios = [self.train, self.valid, self.test];
        if ratios.iter().any(|r| !r.is_finite() || *r < 0.0) {
            return Err(format!(
                "split ratios must be non-negative numbers, got {self}"
            ));
        }
        if self.train <= 0.0 || self.valid <= 0.0 {
            return Err(format!(
                "the train and validation shares must be positive, got {self}"
            ));
        }
        Ok(())
    }
}

impl fmt::Display for SplitRatios {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.train, self.valid, self.test)
    }
}

/// Saved and read in the command-line spelling, `0.7:0.15:0.15`.
impl From<SplitRatios> for String {
    fn from(ratios: SplitRatios) -> String {
        ratios.to_string()
    }
}

impl TryFrom<String> for SplitRatios {
    type Error = String;

    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl FromStr for SplitRatios {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let parts: Vec<f64> = s
            .split(':')
            .map(|p| p.trim().parse::<f64>())
            .collect::<Result<_, _>>()
            .map_err(|_| format!("`{s}` is not three numbers like 0.7:0.15:0.15"))?;
        let [train, valid, test] = parts[..] else {
            return Err(format!("`{s}` is not three numbers like 0.7:0.15:0.15"));
        };
        let ratios = Self { train, valid, test };
        ratios.check()?;
        Ok(ratios)
    }
}

/// Per-column mean and standard deviation, fitted on the training rows and saved with the
/// model so that predictions see inputs on the scale the network was trained on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Standardizer {
    pub mean: Vec<f32>,
    pub std: Vec<f32>,
}

impl Standardizer {
    /// Fits on `table`'s columns. A constant column keeps a scale of 1 (it is only centred).
    pub fn fit(table: &Table) -> Self {
        let width = table.width();
        let rows = table.rows().max(1) as f64;
        let mut sum = vec![0f64; width];
        let mut sum_sq = vec![0f64; width];
        for row in table.values.chunks_exact(width) {
            for (c, &v) in row.iter().enumerate() {
                sum[c] += f64::from(v);
                sum_sq[c] += f64::from(v) * f64::from(v);
            }
        }
        let mean: Vec<f64> = sum.iter().map(|s| s / rows).collect();
        let std = sum_sq
            .iter()
            .zip(&mean)
            .map(|(sq, m)| {
                let sd = (sq / rows - m * m).max(0.0).sqrt();
                if sd > 1e-12 { sd as f32 } else { 1.0 }
            })
            .collect();
        Self {
            mean: mean.iter().map(|&m| m as f32).collect(),
            std,
        }
    }

    /// `(x - mean) / std`, column by column, in place.
    pub fn apply(&self, table: &mut Table) {
        let width = self.mean.len();
        for row in table.values.chunks_exact_mut(width) {
            for ((v, m), s) in row.iter_mut().zip(&self.mean).zip(&self.std) {
                *v = (*v - m) / s;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_cover_every_row_once() {
        let [train, valid, test] = SplitRatios::default().split(101, 7).unwrap();
        assert_eq!((train.len(), valid.len(), test.len()), (71, 15, 15));
        let mut all: Vec<usize> = train.iter().chain(&valid).chain(&test).copied().collect();
        all.sort();
        assert_eq!(all, (0..101).collect::<Vec<_>>());
        assert_eq!(SplitRatios::default().split(101, 7).unwrap()[1], valid);
        assert_ne!(SplitRatios::default().split(101, 8).unwrap()[1], valid);
    }

    #[test]
    fn ratios_parse_and_refuse_nonsense() {
        let r: SplitRatios = "0.8:0.2:0".parse().unwrap();
        assert_eq!(r.split(10, 1).unwrap().map(|s| s.len()), [8, 2, 0]);
        assert_eq!(r.to_string(), "0.8:0.2:0");
        for bad in ["0.8:0.2", "a:b:c", "0.9:0:0.1", "1:-1:1", "0:1:1"] {
            assert!(bad.parse::<SplitRatios>().is_err(), "{bad}");
        }
        assert!(SplitRatios::default().split(2, 1).is_err());
    }

    #[test]
    fn standardizer_centres_and_scales() {
        let mut table = Table {
            columns: vec!["a".into(), "b".into()],
            values: vec![1.0, 5.0, 3.0, 5.0],
        };
        let s = Standardizer::fit(&table);
        assert_eq!(
            (s.mean.clone(), s.std.clone()),
            (vec![2.0, 5.0], vec![1.0, 1.0])
        );
        s.apply(&mut table);
        assert_eq!(table.values, vec![-1.0, 0.0, 1.0, 0.0]);
    }
}
