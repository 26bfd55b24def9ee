//! `quire user add NAME [--admin] [--vault DIR]`: adds a reader (or an admin) to the
//! vault's users file, `VAULT/.quire/users.toml`, or resets their password and role.
//!
//! The password is one line read from stdin (the line break dropped), so scripts can
//! pipe it in: `printf '%s\n' "$PW" | quire user add ada`. On a terminal it is prompted
//! for, and shown as typed: there is no terminal handling here. Only the argon2id hash
//! is stored; the rest of the file (comments, other users) is kept as it was.

use std::io::{BufRead, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use quire_vault::readers::{self, Role, UserWrite};

/// What to do with the readers of a vault.
#[derive(Debug, Subcommand)]
pub(crate) enum UserCommand {
    /// Add a reader to VAULT/.quire/users.toml, or reset their password and role. The
    /// password is read from stdin, one line.
    Add(UserAddArgs),
    /// Make an API token for a reader (VAULT/.quire/tokens.toml), printed once: an
    /// agent sends it as `Authorization: Bearer …` to the MCP endpoint and reads as
    /// that reader. With --revoke, remove every token of theirs instead.
    Token(UserTokenArgs),
}

/// Arguments of `quire user token`.
#[derive(Debug, Clone, Args)]
pub(crate) struct UserTokenArgs {
    /// The reader's name, as in the users file.
    #[arg(value_parser = parse_name)]
    pub name: String,
    /// A note kept beside the token's hash (what it is for).
    #[arg(long)]
    pub label: Option<String>,
    /// Remove every token of this reader instead of making one.
    #[arg(long)]
    pub revoke: bool,
    /// The vault folder.
    #[arg(long, value_name = "DIR", default_value = "examples/vault")]
    pub vault: PathBuf,
}

/// Arguments of `quire user add`.
#[derive(Debug, Clone, Args)]
pub(crate) struct UserAddArgs {
    /// The user's name: letters, digits, `.`, `_`, `-` or `@`.
    #[arg(value_parser = parse_name)]
    pub name: String,
    /// Make them an admin (drafts and view counts too); without it, a reader.
    #[arg(long)]
    pub admin: bool,
    /// The vault folder.
    #[arg(long, value_name = "DIR", default_value = "examples/vault")]
    pub vault: PathBuf,
}

/// Passwords shorter than this get a warning (they are still accepted).
const PASSWORD_LEN_ADVISED: usize = 12;

fn parse_name(s: &str) -> Result<String, readers::NameError> {
    readers::check_name(s).map(|()| s.to_owned())
}

/// Runs `quire user ...`.
pub(crate) fn run(cmd: &UserCommand) -> anyhow::Result<()> {
    match cmd {
        UserCommand::Add(args) => {
            let stdin = std::io::stdin();
            let prompt = stdin.is_terminal();
            let message = add(args, &mut stdin.lock(), prompt)?;
            println!("{message}");
            Ok(())
        }
        UserCommand::Token(args) => {
            println!("{}", token(args)?);
            Ok(())
        }
    }
}

/// Makes (or revokes) a reader's tokens; what to print.
fn token(args: &UserTokenArgs) -> anyhow::Result<String> {
    if !args.vault.is_dir() {
        bail!(
            "no vault folder at {} (give one with --vault DIR)",
            args.vault.display()
        );
    }
    let path = args.vault.join(".quire").join("tokens.toml");
    if args.revoke {
        let n = readers::revoke_tokens(&path, &args.name)
            .with_context(|| format!("cannot update {}", path.display()))?;
        return Ok(format!("revoked {n} token(s) of `{}`", args.name));
    }
    let users_path = users_file(&args.vault);
    let users = readers::Users::load(&users_path)
        .with_context(|| format!("cannot read {}", users_path.display()))?;
    if users.reader(&args.name).is_none() {
        bail!(
            "no user `{}` in {} (add one with `quire user add`)",
            args.name,
            users_path.display()
        );
    }
    let t = readers::add_token(&path, &args.name, args.label.as_deref())
        .with_context(|| format!("cannot update {}", path.display()))?;
    eprintln!(
        "quire: a token for `{}`, shown this once (only its hash is kept in {}):",
        args.name,
        path.display()
    );
    Ok(t)
}

/// Adds or updates the user, the password read from `input`; returns what was done.
fn add(args: &UserAddArgs, input: &mut impl BufRead, prompt: bool) -> anyhow::Result<String> {
    if !args.vault.is_dir() {
        bail!(
            "no vault folder at {} (give one with --vault DIR)",
            args.vault.display()
        );
    }
    if prompt {
        eprint!("Password for {} (shown as you type): ", args.name);
        std::io::stderr().flush().ok();
    }
    let password = read_password(input)?;
    if password.chars().count() < PASSWORD_LEN_ADVISED {
        eprintln!(
            "quire: warning: a password under {PASSWORD_LEN_ADVISED} characters is easy to guess"
        );
    }
    let role = if args.admin {
        Role::Admin
    } else {
        Role::Reader
    };
    let path = users_file(&args.vault);
    let phc = readers::hash_password(&password);
    let outcome = readers::write_user(&path, &args.name, role, &phc)
        .with_context(|| format!("cannot update {}", path.display()))?;
    let done = match outcome {
        UserWrite::Added => "added",
        UserWrite::Updated => "updated",
    };
    Ok(format!(
        "{done} {role} `{}` in {}",
        args.name,
        path.display()
    ))
}

fn users_file(vault: &Path) -> PathBuf {
    vault.join(".quire").join("users.toml")
}

/// One line, at most `PASSWORD_LEN_MAX` bytes, without its line break.
fn read_password(input: &mut impl BufRead) -> anyhow::Result<String> {
    let mut line = String::new();
    let limit = readers::PASSWORD_LEN_MAX as u64 + 2;
    input
        .take(limit)
        .read_line(&mut line)
        .context("cannot read the password from stdin")?;
    let password = line
        .strip_suffix('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .unwrap_or(&line);
    if password.len() > readers::PASSWORD_LEN_MAX {
        bail!(
            "the password is longer than {} bytes",
            readers::PASSWORD_LEN_MAX
        );
    }
    if password.is_empty() {
        bail!("no password given: write it on stdin, one line");
    }
    Ok(password.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;
    use quire_vault::readers::Users;

    /// A scratch folder removed on drop (this crate has no `tempfile`).
    struct Scratch(PathBuf);

    impl Scratch {
        fn new() -> Scratch {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            let dir =
                std::env::temp_dir().join(format!("quire-user-{}-{nanos}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            Scratch(dir)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn parse(args: &[&str]) -> Result<UserAddArgs, clap::Error> {
        let cli = Cli::try_parse_from(args)?;
        let Command::User(UserCommand::Add(a)) = cli.command else {
            panic!("not user add")
        };
        Ok(a)
    }

    #[test]
    fn user_add_parses() {
        let a = parse(&["quire", "user", "add", "ada"]).unwrap();
        assert_eq!(a.name, "ada");
        assert!(!a.admin);
        assert_eq!(a.vault, PathBuf::from("examples/vault"));
        let a = parse(&["quire", "user", "add", "bob", "--admin", "--vault", "v"]).unwrap();
        assert!(a.admin);
        assert_eq!(a.vault, PathBuf::from("v"));
        assert!(parse(&["quire", "user", "add", "a|b"]).is_err());
        assert!(parse(&["quire", "user", "add"]).is_err());
    }

    #[test]
    fn passwords_are_one_line() {
        let read = |s: &str| read_password(&mut s.as_bytes());
        assert_eq!(read("pw one\nignored\n").unwrap(), "pw one");
        assert_eq!(read("pw\r\n").unwrap(), "pw");
        assert_eq!(read("no newline").unwrap(), "no newline");
        assert!(read("\n").is_err());
        assert!(read("").is_err());
        let long = "x".repeat(readers::PASSWORD_LEN_MAX + 1);
        assert!(read(&long).is_err());
    }

    /// `quire user token`: a token for a user in the users file that reads as them
    /// until revoked; none for a name the file does not have.
    #[test]
    fn user_token_makes_and_revokes_a_token() {
        let dir = Scratch::new();
        let users = dir.0.join(".quire/users.toml");
        let phc = readers::hash_password("some password");
        readers::write_user(&users, "ada", Role::Reader, &phc).unwrap();
        let args = |name: &str, revoke: bool| UserTokenArgs {
            name: name.into(),
            label: Some("agent".into()),
            revoke,
            vault: dir.0.clone(),
        };
        let err = token(&args("bob", false)).unwrap_err().to_string();
        assert!(err.contains("no user `bob`"), "{err}");
        let t = token(&args("ada", false)).unwrap();
        let tokens = readers::Tokens::load(&dir.0.join(".quire/tokens.toml")).unwrap();
        let u = Users::load(&users).unwrap();
        assert_eq!(tokens.verify(&t, &u).unwrap().name, "ada");
        assert_eq!(
            token(&args("ada", true)).unwrap(),
            "revoked 1 token(s) of `ada`"
        );
        let tokens = readers::Tokens::load(&dir.0.join(".quire/tokens.toml")).unwrap();
        assert!(tokens.verify(&t, &u).is_none());
    }

    /// The example vault's demo users, as documented in its users file.
    #[test]
    fn the_demo_credentials_verify() {
        let vault = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/vault");
        let users = Users::load(&users_file(&vault)).unwrap();
        let reader = users.verify("reader", "reader-demo-password").unwrap();
        assert_eq!(reader.role, Role::Reader);
        let admin = users.verify("admin", "admin-demo-password").unwrap();
        assert_eq!(admin.role, Role::Admin);
    }

    /// One full-cost argon2 hash and one verification: a few seconds in debug builds.
    #[test]
    fn user_add_writes_a_hash_that_verifies() {
        let dir = Scratch::new();
        let args = UserAddArgs {
            name: "ada".into(),
            admin: true,
            vault: dir.0.clone(),
        };
        let msg = add(&args, &mut "s3cret pass phrase\n".as_bytes(), false).unwrap();
        assert!(msg.starts_with("added admin `ada`"), "{msg}");
        let users = Users::load(&users_file(&dir.0)).unwrap();
        let ada = users.verify("ada", "s3cret pass phrase").unwrap();
        assert_eq!(ada.role, Role::Admin);
        let missing = UserAddArgs {
            vault: dir.0.join("nope"),
            ..args
        };
        let e = add(&missing, &mut "pw\n".as_bytes(), false).unwrap_err();
        assert!(e.to_string().contains("no vault folder"), "{e}");
    }
}
