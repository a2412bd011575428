//! `--set section.key=value` overrides applied to a run file's TOML table, and the TOML
//! parse whose errors name the line and column.

use std::path::Path;

use super::ConfigError;

/// The TOML table of a run file; a syntax error becomes one line naming where it is.
pub(super) fn parse_value(text: &str, path: &Path) -> Result<toml::Table, ConfigError> {
    text.parse::<toml::Table>().map_err(|e| {
        let place = e.span().map(|span| {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
            format!("line {line}, column {column}: ")
        });
        ConfigError::Parse {
            path: path.to_path_buf(),
            key: None,
            message: format!(
                "{}{}",
                place.unwrap_or_default(),
                e.message().trim_end().replace('\n', " ")
            ),
        }
    })
}

/// A `--set` applied to a run file's table.
pub(super) struct AppliedOverride<'a> {
    assignment: &'a str,
    /// `training.epochs`.
    key: String,
    /// The section it created, which the run file did not have.
    new_section: Option<String>,
}

/// The error about `key` (`message`) told as the fault of the `--set` that wrote the key or
/// created its section, if one did.
pub(super) fn blame_override(
    applied: &[AppliedOverride],
    key: &str,
    message: &str,
) -> Option<ConfigError> {
    applied.iter().rev().find_map(|set| {
        let within = |prefix: &str| key == prefix || key.starts_with(&format!("{prefix}."));
        let message = match &set.new_section {
            _ if key == set.key => message.to_string(),
            Some(section) if within(section) => format!(
                "the run file has no [{section}] section, and a new one needs more than this \
                 key: {message}"
            ),
            _ => return None,
        };
        Some(ConfigError::BadOverride {
            assignment: set.assignment.to_string(),
            message,
        })
    })
}

/// Applies `section.key=value` to `table`; a value that is not TOML is taken as a string.
pub(super) fn set<'a>(
    table: &mut toml::Table,
    assignment: &'a str,
) -> Result<AppliedOverride<'a>, ConfigError> {
    let bad = || ConfigError::Override(assignment.to_string());
    if assignment.contains(['\n', '\r']) {
        // Parsed as TOML, the lines after the first would set keys of their own, unseen.
        return Err(ConfigError::BadOverride {
            assignment: assignment.escape_debug().to_string(),
            message: "a `--set` takes one key on one line: give each key a --set of its own".into(),
        });
    }
    let (key, raw) = assignment.split_once('=').ok_or_else(bad)?;
    let path: Vec<&str> = key.trim().split('.').collect();
    if path.iter().any(|part| part.is_empty()) {
        return Err(bad());
    }
    let value = format!("v = {raw}")
        .parse::<toml::Table>()
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.trim().to_string()));
    let (last, parents) = path.split_last().expect("split yields at least one part");
    let new_section =
        (!parents.is_empty() && !table.contains_key(parents[0])).then(|| parents[0].to_string());
    let mut current = table;
    for part in parents {
        current = current
            .entry(part.to_string())
            .or_insert_with(|| toml::Value::Table(Default::default()))
            .as_table_mut()
            .ok_or_else(bad)?;
    }
    current.insert(last.to_string(), value);
    Ok(AppliedOverride {
        assignment,
        key: path.join("."),
        new_section,
    })
}
