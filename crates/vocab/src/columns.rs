//! Column names as Spark spells them in column lists (`layout.zorder`, `layout.partition_by`):
//! a path of names separated by dots, a name holding a dot (or any other character) quoted in
//! backticks, a backtick inside quotes doubled: `` `id.num` `` is the top-level column `id.num`,
//! `a.b` the field `b` of the struct `a`, `` `a``b`.c `` the field `c` of the column ``a`b``.
//!
//! Owns this one parse, for the inventory (which checks the syntax) and the Delta crate (which
//! finds the path in a table's schema); it never sees a schema.

/// The names of the path `text` spells, outermost first; why not when it is malformed.
pub fn column_path(text: &str) -> Result<Vec<String>, String> {
    let mut names = Vec::new();
    let mut current = String::new();
    let mut chars = text.chars().peekable();
    // whether the current name was quoted (a quoted name may be empty of dots but not of text)
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match c {
            '`' if current.is_empty() && !quoted => {
                quoted = true;
                loop {
                    match chars.next() {
                        Some('`') if chars.peek() == Some(&'`') => {
                            chars.next();
                            current.push('`');
                        }
                        Some('`') => break,
                        Some(other) => current.push(other),
                        None => {
                            return Err(format!(
                                "`{text}` opens a backtick it never closes: quote a name as \
                                 `` `id.num` `` (a backtick inside it doubled)"
                            ))
                        }
                    }
                }
                if !matches!(chars.peek(), None | Some('.')) {
                    return Err(format!(
                        "`{text}` has text right after a quoted name: separate names with a dot"
                    ));
                }
            }
            '`' => {
                return Err(format!(
                    "`{text}` has a backtick inside a name: quote the whole name, as \
                     `` `id.num` ``, and double a backtick inside it"
                ))
            }
            '.' => names.push(take_name(text, &mut current, &mut quoted)?),
            other => current.push(other),
        }
    }
    names.push(take_name(text, &mut current, &mut quoted)?);
    Ok(names)
}

fn take_name(text: &str, current: &mut String, quoted: &mut bool) -> Result<String, String> {
    if current.is_empty() && !*quoted {
        return Err(format!(
            "`{text}` has an empty name: a name holding a dot is quoted in backticks, as \
             `` `id.num` ``"
        ));
    }
    *quoted = false;
    Ok(std::mem::take(current))
}

/// How `names` (a path) is spelled back: names that need it in backticks.
pub fn quote_path(names: &[String]) -> String {
    names
        .iter()
        .map(|name| {
            if !name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_') {
                name.clone()
            } else {
                format!("`{}`", name.replace('`', "``"))
            }
        })
        .collect::<Vec<_>>()
        .join(".")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(text: &str) -> Vec<String> {
        column_path(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn dots_separate_names_and_backticks_quote_them() {
        assert_eq!(path("id"), ["id"]);
        assert_eq!(path("a.b"), ["a", "b"]);
        assert_eq!(path("`id.num`"), ["id.num"]);
        assert_eq!(path("`a.b`.c"), ["a.b", "c"]);
        assert_eq!(path("s.`x y`"), ["s", "x y"]);
        assert_eq!(path("`a``b`"), ["a`b"]);
        assert_eq!(path("événement"), ["événement"]);
    }

    #[test]
    fn malformed_paths_say_how_to_quote() {
        for bad in ["`id.num", "a..b", ".a", "a.", "`a`b", "a`b`", ""] {
            let err = column_path(bad).expect_err(bad);
            assert!(
                err.contains("`id.num`") || err.contains("dot"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn quoting_spells_a_path_back_as_it_parses() {
        for names in [
            vec!["id".to_owned()],
            vec!["id.num".to_owned()],
            vec!["a`b".to_owned(), "c d".to_owned()],
        ] {
            assert_eq!(path(&quote_path(&names)), names);
        }
        assert_eq!(quote_path(&["id.num".to_owned()]), "`id.num`");
    }
}
