//! Where a tabular run's rows come from: a CSV file, or one of the built-in generators.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::data::{DataError, Table, synthetic};

/// The built-in tabular problems.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Generator {
    /// The four XOR points, repeated to `rows` rows (at least 4) so that every split holds
    /// each point.
    Xor,
    /// Random 2-D points labelled by quadrant parity.
    Quadrants,
    /// A linear target plus noise.
    Linear,
    /// A logistic-rule label.
    Logistic,
    /// The 8-feature nonlinear "market" regression.
    Market,
}

/// Where a tabular run's rows come from.
#[derive(Debug, Clone, PartialEq)]
pub enum TableSource {
    Csv(PathBuf),
    Generated {
        generator: Generator,
        rows: usize,
        seed: u64,
    },
}

impl TableSource {
    /// The `columns` of the table (features then targets).
    pub fn load(&self, columns: &[String]) -> Result<Table, DataError> {
        let table = match self {
            TableSource::Csv(path) => return Table::read_csv(path, columns),
            TableSource::Generated {
                generator,
                rows,
                seed,
            } => generator.generate(*rows, *seed),
        };
        table.select_columns(columns, &self.name())
    }

    /// The file the source reads, if any.
    pub fn input(&self) -> Option<&Path> {
        match self {
            TableSource::Csv(path) => Some(path),
            TableSource::Generated { .. } => None,
        }
    }

    /// How errors name the source: the CSV's path, or `generated:<generator>`.
    pub fn name(&self) -> PathBuf {
        match self {
            TableSource::Csv(path) => path.clone(),
            TableSource::Generated { generator, .. } => {
                PathBuf::from(format!("generated:{generator:?}").to_lowercase())
            }
        }
    }
}

impl Generator {
    /// `rows` rows of this problem.
    pub fn generate(self, rows: usize, seed: u64) -> Table {
        match self {
            Generator::Xor => {
                let points = synthetic::xor();
                let indices: Vec<usize> = (0..rows.max(4)).map(|i| i % 4).collect();
                points.select_rows(&indices)
            }
            Generator::Quadrants => synthetic::quadrants(rows, seed),
            Generator::Linear => synthetic::linear(rows, seed),
            Generator::Logistic => synthetic::logistic(rows, seed),
            Generator::Market => synthetic::market(rows, seed),
        }
    }

    /// Feature columns and the target column.
    pub fn columns(self) -> (Vec<String>, String) {
        let mut columns = self.generate(4, 0).columns;
        let target = columns
            .pop()
            .expect("generated tables have a target column");
        (columns, target)
    }
}
