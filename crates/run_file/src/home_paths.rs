//! `~` in a run file's paths means the user's home folder, as it does in a shell, so that
//! `artifact_dir = "~/runs/a"` writes there instead of creating a folder named `~`.

use std::path::Path;

use toml::Value;

/// The run-file keys whose values are paths, in whichever section they appear.
const PATH_KEYS: [&str; 8] = [
    "artifact_dir",
    "dir",
    "path",
    "root",
    "test_root",
    "images",
    "labels",
    "init_from",
];

/// Replaces a leading `~` (alone or before a `/`) of every path value in `table` by the
/// home folder; without a known home folder the paths stay as written.
pub(super) fn expand_home(table: &mut toml::Table) {
    let Some(home) = dirs::home_dir() else {
        return;
    };
    expand_in(table, &home);
}

fn expand_in(table: &mut toml::Table, home: &Path) {
    for (key, value) in table.iter_mut() {
        match value {
            Value::String(text) if PATH_KEYS.contains(&key.as_str()) => {
                if let Some(rest) = text.strip_prefix('~')
                    && (rest.is_empty() || rest.starts_with('/'))
                {
                    let path = match rest.trim_start_matches('/') {
                        "" => home.to_path_buf(),
                        rest => home.join(rest),
                    };
                    *text = path.to_string_lossy().into_owned();
                }
            }
            Value::Table(inner) => expand_in(inner, home),
            Value::Array(items) => items.iter_mut().for_each(|item| {
                if let Value::Table(inner) = item {
                    expand_in(inner, home);
                }
            }),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    #[test]
    fn a_leading_tilde_of_a_path_is_the_home_folder_and_nothing_else_changes() {
        let home = PathBuf::from("/home/someone");
        let mut table: toml::Table = toml::from_str(
            "artifact_dir = \"~\"\nname = \"~/x\"\n[data]\nroot = \"~/photos\"\n\
             path = \"~other/t.csv\"\ntrain = { images = \"~/a\" }\n",
        )
        .unwrap();
        expand_in(&mut table, &home);
        assert_eq!(table["artifact_dir"].as_str(), Some("/home/someone"));
        assert_eq!(table["name"].as_str(), Some("~/x"));
        let data = table["data"].as_table().unwrap();
        assert_eq!(data["root"].as_str(), Some("/home/someone/photos"));
        assert_eq!(data["path"].as_str(), Some("~other/t.csv"));
        assert_eq!(data["train"]["images"].as_str(), Some("/home/someone/a"));
    }
}
