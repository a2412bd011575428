//! Numeric columns of a CSV file with a header, picked by name: the input of tabular runs.

use std::io::Read;
use std::path::Path;

use crate::atomic_file::write_atomically_with;
use crate::data::DataError;

/// A row-major block of `f32` values with named columns.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pub columns: Vec<String>,
    pub values: Vec<f32>,
}

impl Table {
    /// Reads the columns named `columns`, in that order, from the CSV file at `path`. Other
    /// columns may hold anything; the chosen ones must hold a finite number in every row.
    pub fn read_csv(path: &Path, columns: &[String]) -> Result<Self, DataError> {
        let file = std::fs::File::open(path).map_err(|source| DataError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse_csv(
            std::io::BufReader::with_capacity(1 << 20, file),
            path,
            columns,
        )
    }

    /// Like [`Table::read_csv`], from any reader; `path` only names the source in errors.
    pub fn parse_csv<R: Read>(
        reader: R,
        path: &Path,
        columns: &[String],
    ) -> Result<Self, DataError> {
        let csv_err = |error: csv::Error| DataError::Csv {
            path: path.to_path_buf(),
            reason: error.to_string(),
        };
        let mut reader = csv::ReaderBuilder::new()
            .trim(csv::Trim::All)
            .from_reader(reader);
        let header = reader.headers().map_err(csv_err)?.clone();
        if header.is_empty() {
            return Err(DataError::CsvEmpty {
                path: path.to_path_buf(),
            });
        }
        let positions = columns
            .iter()
            .map(|name| {
                let mut found = header.iter().enumerate().filter(|(_, h)| h == name);
                match (found.next(), found.next()) {
                    (Some((position, _)), None) => Ok(position),
                    (Some((first, _)), Some((second, _))) => Err(DataError::CsvColumnTwice {
                        path: path.to_path_buf(),
                        column: name.clone(),
                        positions: [first + 1, second + 1],
                    }),
                    (None, _) => Err(DataError::CsvColumn {
                        path: path.to_path_buf(),
                        column: name.clone(),
                        available: header.iter().collect::<Vec<_>>().join(", "),
                    }),
                }
            })
            .collect::<Result<Vec<_>, _>>()?;

        let mut values = Vec::new();
        let mut record = csv::ByteRecord::new();
        while reader.read_byte_record(&mut record).map_err(csv_err)? {
            let line = record.position().map_or(0, |p| p.line());
            for (&position, name) in positions.iter().zip(columns) {
                let field = record.get(position).unwrap_or_default();
                values.push(parse_value(field).map_err(|what| DataError::CsvValue {
                    path: path.to_path_buf(),
                    line,
                    column: name.clone(),
                    what,
                })?);
            }
        }
        if values.is_empty() {
            return Err(DataError::CsvEmpty {
                path: path.to_path_buf(),
            });
        }
        Ok(Self {
            columns: columns.to_vec(),
            values,
        })
    }

    /// Writes the table as CSV with a header to `path` (see [`write_csv_atomically`]).
    pub fn write_csv(&self, path: &Path) -> Result<(), DataError> {
        write_csv_atomically(path, |writer| {
            writer.write_record(&self.columns)?;
            for row in self.values.chunks_exact(self.width()) {
                writer.write_record(row.iter().map(|v| v.to_string()))?;
            }
            Ok(())
        })
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.values.len() / self.columns.len().max(1)
    }

    /// Number of columns.
    pub fn width(&self) -> usize {
        self.columns.len()
    }

    /// Row `i` as a slice.
    pub fn row(&self, i: usize) -> &[f32] {
        &self.values[i * self.width()..(i + 1) * self.width()]
    }

    /// Splits the columns into the first `left` ones and the rest.
    pub fn split_columns(&self, left: usize) -> (Table, Table) {
        let width = self.width();
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for row in self.values.chunks_exact(width) {
            a.extend_from_slice(&row[..left]);
            b.extend_from_slice(&row[left..]);
        }
        (
            Table {
                columns: self.columns[..left].to_vec(),
                values: a,
            },
            Table {
                columns: self.columns[left..].to_vec(),
                values: b,
            },
        )
    }

    /// The columns named `columns`, in that order; `source` names the table in errors.
    pub fn select_columns(&self, columns: &[String], source: &Path) -> Result<Table, DataError> {
        let positions = columns
            .iter()
            .map(|name| {
                self.columns
                    .iter()
                    .position(|c| c == name)
                    .ok_or_else(|| DataError::CsvColumn {
                        path: source.to_path_buf(),
                        column: name.clone(),
                        available: self.columns.join(", "),
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let values = (0..self.rows())
            .flat_map(|i| positions.iter().map(move |&p| self.row(i)[p]))
            .collect();
        Ok(Table {
            columns: columns.to_vec(),
            values,
        })
    }

    /// The rows at `indices`, in that order.
    pub fn select_rows(&self, indices: &[usize]) -> Table {
        let mut values = Vec::with_capacity(indices.len() * self.width());
        for &i in indices {
            values.extend_from_slice(self.row(i));
        }
        Table {
            columns: self.columns.clone(),
            values,
        }
    }
}

/// Runs `write` on a CSV writer to a temporary file beside `path`, then renames it into
/// place ([`write_atomically_with`]), so that a reader (or a crash) never sees half a file.
pub fn write_csv_atomically(
    path: &Path,
    write: impl FnOnce(&mut csv::Writer<std::fs::File>) -> csv::Result<()>,
) -> Result<(), DataError> {
    write_atomically_with(path, |partial| {
        let mut writer = csv::Writer::from_path(partial)?;
        write(&mut writer)?;
        writer.flush()
    })
    .map_err(DataError::from)
}

/// Refuses `path` as the output of predictions whose header ends with `columns` unless it
/// is absent or already such a file (predictions written before): cubenet never replaces a
/// file it did not write, and reading an input back as the output would lose it.
pub fn check_replaceable_csv(path: &Path, columns: &[&str]) -> Result<(), DataError> {
    if !path.exists() {
        return Ok(());
    }
    // Only a plain file is read for its header: a device or a pipe could block.
    let ends_with_columns = path.is_file()
        && csv::Reader::from_path(path)
            .and_then(|mut reader| reader.headers().cloned())
            .is_ok_and(|header| {
                let header: Vec<&str> = header.iter().collect();
                header.ends_with(columns)
            });
    match ends_with_columns {
        true => Ok(()),
        false => Err(DataError::Csv {
            path: path.to_path_buf(),
            reason: format!(
                "exists and is not a predictions file (a CSV whose header ends with {}), so \
                 cubenet will not replace it: choose another output path",
                columns.join(",")
            ),
        }),
    }
}

/// Parses one field; the error says what is wrong with it.
fn parse_value(field: &[u8]) -> Result<f32, String> {
    if field.is_empty() {
        return Err("missing value".into());
    }
    let text = String::from_utf8_lossy(field);
    match text.parse::<f32>() {
        Ok(v) if v.is_finite() => Ok(v),
        Ok(_) => Err(format!("`{text}` is not a finite number")),
        Err(_) => Err(format!("`{text}` is not a number")),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::data::{Table, write_csv_atomically};

    #[test]
    fn a_column_the_header_names_twice_is_refused_when_it_is_asked_for() {
        let csv = "x1,x2,x1,y\n1,2,3,0\n";
        let read = |columns: &[&str]| {
            let columns: Vec<String> = columns.iter().map(|c| c.to_string()).collect();
            Table::parse_csv(csv.as_bytes(), Path::new("rows.csv"), &columns)
        };
        let message = read(&["x1", "y"]).unwrap_err().to_string();
        assert!(
            message.contains("names column `x1` twice (columns 1 and 3)"),
            "{message}"
        );
        assert_eq!(read(&["x2", "y"]).unwrap().row(0), [2.0, 0.0]);
    }

    #[test]
    fn a_failed_write_says_it_could_not_write_and_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing-folder").join("out.csv");
        let error = write_csv_atomically(&path, |writer| writer.write_record(["x"])).unwrap_err();
        let line = error.to_string();
        assert!(line.starts_with("cannot write "), "{line}");
        assert!(line.contains("out.csv"), "{line}");
        assert!(!path.exists());
    }
}
