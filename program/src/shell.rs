//! Commands the programs print for the operator to run (a fix, a drop-in's
//! ExecStart): each value one word for a POSIX shell and systemd alike.

/// `value` as one word of a POSIX shell command: as it is when no shell
/// treats any of its characters specially, single-quoted otherwise.
pub fn shell_word(value: &str) -> String {
    let plain = !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@%+,".contains(c));
    if plain { value.to_owned() } else { quote(value) }
}

/// Always single-quoted (an env file's value), a `'` inside escaped.
pub fn quote(value: &str) -> String {
    format!("'{}'", value.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_words_a_shell_would_change_are_quoted() {
        assert_eq!(
            shell_word("/etc/kubernetes/credential-providers.yaml"),
            "/etc/kubernetes/credential-providers.yaml"
        );
        assert_eq!(shell_word("/tmp/kube config"), "'/tmp/kube config'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
        assert_eq!(shell_word("$HOME"), "'$HOME'");
        assert_eq!(shell_word(""), "''");
    }
}
