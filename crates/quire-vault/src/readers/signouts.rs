//! Sign-outs that hold server side: a session generation per user, in memory, written
//! through to `VAULT/.quire/sessions` on every sign-out and read back at start.
//!
//! Key decisions:
//! - **Signing out signs that user out everywhere.** A session cookie carries its
//!   user's generation when it was issued; signing out bumps the generation, so every
//!   cookie issued to that user before, on any browser or device, copied or not, is
//!   refused from then on. That is what a sign-out has to mean once a cookie may have
//!   been copied, and it is what many sites' "sign out" does. Revoking one session
//!   alone would need a list of session ids kept until each expires, growing with
//!   every sign-out; a generation per user is bounded by the users file.
//! - **No disk I/O on a request.** Checking a cookie reads the in-memory table; only a
//!   sign-out writes, the whole file (a line per user who ever signed out), to a
//!   temporary file that is synced and renamed into place.
//! - **Losing the file never brings a session back.** The file also holds a random
//!   epoch, and every cookie carries it. A missing or damaged file starts a new epoch,
//!   which signs everyone out (as deleting the session secret does); it never resets
//!   generations under old cookies.
//! - **Bounded:** only users who signed out have a line, and at most
//!   [`GENERATIONS_MAX`]; past that a new epoch starts (everyone signs in again) with
//!   an empty table, rather than forgetting whose sign-out to honour.
//!
//! The file (text, one record per line, like the secret it sits beside):
//!
//! ```text
//! quire-sessions 1            magic and format version
//! epoch 3f9c0a5e11d2b7a4      16 hex digits
//! user ada 3                  a user's generation (names as in the users file)
//! sha256 <64 hex digits>      of every byte above this line
//! ```
//!
//! Anything else (wrong magic or version, a bad line, a wrong checksum, over
//! [`FILE_BYTES_MAX`]) is a damaged file: a warning and a new epoch, never a panic.
//!
//! **On a cluster node** ([`SignOuts::shared`]) the table is the cluster's, kept in
//! Redis by `quire-cluster`, and this one is its copy in memory: no file, a random
//! epoch until the cluster's table is adopted (so no cookie of the cluster is
//! honoured before the node knows who signed out), then raised entry by entry as sign-outs are read
//! from the cluster's log. Raising never lowers a generation, so entries applied
//! twice or out of order leave the same table.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, RwLock};

use rand::RngCore;
use sha2::{Digest, Sha256};

use super::error::ReadersError;
use super::file::replace_file;
use super::hex::hex;
use super::name::{check_name, NameError};

/// Users with a generation above zero before a new epoch starts.
const GENERATIONS_MAX: usize = 10_000;
/// Largest file read: a line per user at most 64 + 30 bytes, and a little more.
const FILE_BYTES_MAX: usize = GENERATIONS_MAX * 100 + 4096;
const MAGIC: &str = "quire-sessions 1";

/// The state every session cookie is checked against.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Table {
    epoch: u64,
    generations: HashMap<String, u64>,
}

impl Table {
    fn fresh() -> Table {
        Table {
            epoch: rand::rng().next_u64(),
            generations: HashMap::new(),
        }
    }
}

/// Per-user session generations and the epoch, checked on every signed-in request.
#[derive(Debug)]
pub(crate) struct SignOuts {
    /// `None`: kept in memory only.
    path: Option<PathBuf>,
    table: RwLock<Table>,
    /// Serialises writes of the file, so the last one written holds the last state.
    writing: Mutex<()>,
}

impl SignOuts {
    /// A table in memory only, at epoch 0 (tests, and tools that issue no cookies).
    #[cfg(test)]
    pub(super) fn in_memory() -> SignOuts {
        SignOuts {
            path: None,
            table: RwLock::new(Table {
                epoch: 0,
                generations: HashMap::new(),
            }),
            writing: Mutex::new(()),
        }
    }

    /// The table in the file at `path`; a missing or damaged file is a new epoch
    /// (written at once, so it holds across restarts). An unreadable or unwritable
    /// file is an error: sign-outs could not be kept.
    pub(crate) fn load_or_create(path: &Path) -> Result<SignOuts, ReadersError> {
        let io = |source| ReadersError::Io {
            path: path.to_owned(),
            source,
        };
        let (table, write) = match std::fs::read(path) {
            Ok(bytes) => match parse(&bytes) {
                Ok(t) => (t, false),
                Err(why) => {
                    tracing::warn!(
                        path = %path.display(),
                        why = %why,
                        "the sign-out table is damaged; starting a new epoch (everyone signs in again)"
                    );
                    (Table::fresh(), true)
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (Table::fresh(), true),
            Err(e) => return Err(io(e)),
        };
        if write {
            replace_file(path, render(&table).as_bytes(), true).map_err(io)?;
        }
        Ok(SignOuts {
            path: Some(path.to_owned()),
            table: RwLock::new(table),
            writing: Mutex::new(()),
        })
    }

    /// The cluster's table on a cluster node (see the module doc): memory only, and
    /// at a fresh random epoch, which no cookie carries, until [`SignOuts::adopt`].
    pub(crate) fn shared() -> SignOuts {
        SignOuts {
            path: None,
            table: RwLock::new(Table::fresh()),
            writing: Mutex::new(()),
        }
    }

    /// Takes the cluster's table: `epoch` and every user's generation. At the same
    /// epoch generations only rise (a sign-out applied here after the cluster's
    /// table was read stays); a new epoch replaces the table.
    pub(crate) fn adopt(&self, epoch: u64, generations: HashMap<String, u64>) {
        let mut t = self.table.write().unwrap_or_else(|e| e.into_inner());
        if t.epoch != epoch {
            *t = Table { epoch, generations };
            return;
        }
        for (name, g) in generations {
            let mine = t.generations.entry(name).or_insert(0);
            *mine = (*mine).max(g);
        }
    }

    /// Raises `name`'s generation to `generation` (a sign-out the cluster recorded):
    /// every cookie of `name` issued at a lower generation is refused from now on. A
    /// lower or equal generation changes nothing.
    pub(crate) fn raise(&self, name: &str, generation: u64) {
        let mut t = self.table.write().unwrap_or_else(|e| e.into_inner());
        let g = t.generations.entry(name.to_owned()).or_insert(0);
        *g = (*g).max(generation);
    }

    /// The epoch and `name`'s generation, for a cookie issued now.
    pub(crate) fn current(&self, name: &str) -> (u64, u64) {
        let t = self.read();
        (t.epoch, t.generations.get(name).copied().unwrap_or(0))
    }

    /// Whether a cookie of `name` at `epoch` and `generation` is still current.
    pub(crate) fn is_current(&self, name: &str, epoch: u64, generation: u64) -> bool {
        self.current(name) == (epoch, generation)
    }

    /// Ends every session of `name` issued so far, then writes the table. On an error
    /// the sessions are still refused by this process, but a restart would honour
    /// them again.
    pub(crate) fn sign_out(&self, name: &str) -> Result<(), ReadersError> {
        {
            let mut t = self.table.write().unwrap_or_else(|e| e.into_inner());
            if !t.generations.contains_key(name) && t.generations.len() >= GENERATIONS_MAX {
                tracing::warn!(
                    users = t.generations.len(),
                    "the sign-out table is full; starting a new epoch (everyone signs in again)"
                );
                *t = Table::fresh();
            }
            let g = t.generations.entry(name.to_owned()).or_insert(0);
            *g = g.saturating_add(1);
        }
        self.write()
    }

    /// Writes the current table (the latest state, whoever changed it last).
    fn write(&self) -> Result<(), ReadersError> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let _one_at_a_time = self.writing.lock().unwrap_or_else(|e| e.into_inner());
        let text = render(&self.read());
        replace_file(path, text.as_bytes(), true).map_err(|source| ReadersError::Io {
            path: path.clone(),
            source,
        })
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Table> {
        // Each change is one assignment: a panic elsewhere leaves a whole table.
        self.table.read().unwrap_or_else(|e| e.into_inner())
    }
}

/// The file's text for `t`, users in name order (the same table, the same bytes).
fn render(t: &Table) -> String {
    let mut names: Vec<(&String, &u64)> = t.generations.iter().collect();
    names.sort();
    let mut s = format!("{MAGIC}\nepoch {:016x}\n", t.epoch);
    for (name, generation) in names {
        s.push_str(&format!("user {name} {generation}\n"));
    }
    let sum = hex(&Sha256::digest(s.as_bytes()));
    s.push_str(&format!("sha256 {sum}\n"));
    s
}

/// Why a sign-out table file is not one (it is then replaced by a new epoch).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum Damage {
    #[error("over {} bytes", FILE_BYTES_MAX)]
    TooLarge,
    #[error("not UTF-8")]
    NotUtf8,
    #[error("no newline at the end")]
    NoNewline,
    #[error("no checksum line")]
    NoChecksum,
    #[error("wrong checksum")]
    WrongChecksum,
    #[error("not `{}`", MAGIC)]
    NotMagic,
    #[error("no epoch line")]
    NoEpoch,
    #[error("bad line `{0}`")]
    BadLine(String),
    #[error(transparent)]
    BadName(#[from] NameError),
    #[error("bad generation for `{0}`")]
    BadGeneration(String),
    #[error("`{0}` is listed twice")]
    Twice(String),
    #[error("over {} users", GENERATIONS_MAX)]
    TooMany,
}

/// The table in `bytes`, or why it is damaged.
fn parse(bytes: &[u8]) -> Result<Table, Damage> {
    if bytes.len() > FILE_BYTES_MAX {
        return Err(Damage::TooLarge);
    }
    let text = std::str::from_utf8(bytes).map_err(|_| Damage::NotUtf8)?;
    let lines_end = text.strip_suffix('\n').ok_or(Damage::NoNewline)?;
    let body_end = lines_end
        .rfind('\n')
        .map(|i| i + 1)
        .ok_or(Damage::NoChecksum)?;
    let (body, sum) = lines_end.split_at(body_end);
    if sum != format!("sha256 {}", hex(&Sha256::digest(body.as_bytes()))) {
        return Err(Damage::WrongChecksum);
    }
    let mut lines = body.lines();
    if lines.next() != Some(MAGIC) {
        return Err(Damage::NotMagic);
    }
    let epoch = lines
        .next()
        .and_then(|l| l.strip_prefix("epoch "))
        .filter(|e| e.len() == 16)
        .and_then(|e| u64::from_str_radix(e, 16).ok())
        .ok_or(Damage::NoEpoch)?;
    let mut generations = HashMap::new();
    for line in lines {
        let (name, generation) = line
            .strip_prefix("user ")
            .and_then(|l| l.split_once(' '))
            .ok_or_else(|| Damage::BadLine(line.chars().take(80).collect()))?;
        check_name(name)?;
        let generation: u64 = generation
            .parse()
            .map_err(|_| Damage::BadGeneration(name.to_owned()))?;
        if generations.insert(name.to_owned(), generation).is_some() {
            return Err(Damage::Twice(name.to_owned()));
        }
        if generations.len() > GENERATIONS_MAX {
            return Err(Damage::TooMany);
        }
    }
    Ok(Table { epoch, generations })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sign_outs_bump_generations_and_survive_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".quire/sessions");
        let a = SignOuts::load_or_create(&path).unwrap();
        let (epoch, g) = a.current("ada");
        assert_eq!(g, 0);
        a.sign_out("ada").unwrap();
        assert!(!a.is_current("ada", epoch, 0));
        assert!(a.is_current("ada", epoch, 1));
        assert!(
            a.is_current("bob", epoch, 0),
            "other users keep their sessions"
        );
        let b = SignOuts::load_or_create(&path).unwrap();
        assert_eq!(b.current("ada"), (epoch, 1), "after a restart");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[test]
    fn a_damaged_or_missing_file_is_a_new_epoch_never_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sessions");
        let first = SignOuts::load_or_create(&path).unwrap();
        first.sign_out("ada").unwrap();
        let (epoch, _) = first.current("ada");
        let good = std::fs::read_to_string(&path).unwrap();
        let damaged = [
            good.replace("user ada 1", "user ada 0"),
            good.replace(MAGIC, "quire-sessions 2"),
            good[..good.len() - 10].to_owned(),
            good.replace("sha256", "sha257"),
            String::new(),
            "\n\n\n".into(),
            "sha256 ".into(),
            format!("{}\n", "x".repeat(FILE_BYTES_MAX + 1)),
        ];
        for text in damaged {
            std::fs::write(&path, &text).unwrap();
            let t = SignOuts::load_or_create(&path).unwrap();
            assert_ne!(t.current("ada").0, epoch, "{text:?}");
            assert_eq!(t.current("ada").1, 0);
            // ... and the new epoch was written: it holds across the next restart.
            let again = SignOuts::load_or_create(&path).unwrap();
            assert_eq!(again.current("ada"), t.current("ada"));
        }
        std::fs::write(&path, [0xff, 0xfe, 0]).unwrap();
        assert_ne!(
            SignOuts::load_or_create(&path).unwrap().current("x").0,
            epoch
        );
        std::fs::remove_file(&path).unwrap();
        assert_ne!(
            SignOuts::load_or_create(&path).unwrap().current("x").0,
            epoch
        );
    }

    #[test]
    fn the_file_round_trips_and_hostile_lines_are_refused() {
        let mut t = Table::fresh();
        t.generations.insert("ada".into(), 3);
        t.generations.insert("b.o-b@x".into(), u64::MAX);
        assert_eq!(parse(render(&t).as_bytes()), Ok(t.clone()));
        for bad in [
            "user a|b 1",
            "user ada x",
            "user ada 1 2",
            "ada 1",
            "user  1",
        ] {
            let body = format!("{MAGIC}\nepoch {:016x}\n{bad}\n", t.epoch);
            let sum = hex(&Sha256::digest(body.as_bytes()));
            assert!(
                parse(format!("{body}sha256 {sum}\n").as_bytes()).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn every_flipped_byte_or_cut_is_a_damaged_file() {
        let mut t = Table::fresh();
        t.generations.insert("ada".into(), 3);
        t.generations.insert("bob".into(), 12);
        let good = render(&t).into_bytes();
        for i in 0..good.len() {
            for bit in [0x01u8, 0x20, 0x80] {
                let mut b = good.clone();
                b[i] ^= bit;
                assert!(parse(&b).is_err(), "byte {i} ^ {bit:#x}");
            }
            assert!(parse(&good[..i]).is_err(), "cut at {i}");
        }
    }

    #[test]
    fn a_shared_table_honours_nothing_until_adopted_and_only_ever_raises() {
        let s = SignOuts::shared();
        let (local, _) = s.current("ada");
        assert_ne!(local, 7);
        assert!(
            !s.is_current("ada", 7, 0),
            "no cookie of the cluster's epoch yet"
        );
        s.adopt(7, HashMap::from([("ada".to_owned(), 2)]));
        assert!(s.is_current("ada", 7, 2));
        assert!(s.is_current("bob", 7, 0));
        s.raise("ada", 3);
        s.raise("ada", 1);
        s.raise("bob", 1);
        assert!(!s.is_current("ada", 7, 2), "signed out");
        assert!(
            s.is_current("ada", 7, 3),
            "a lower generation read late changes nothing"
        );
        assert!(s.is_current("bob", 7, 1));
        s.adopt(
            7,
            HashMap::from([("ada".to_owned(), 2), ("cy".to_owned(), 4)]),
        );
        assert!(
            s.is_current("ada", 7, 3),
            "an older copy of the table lowers nothing"
        );
        assert!(s.is_current("cy", 7, 4));
        s.adopt(8, HashMap::new());
        assert!(s.is_current("ada", 8, 0), "a new epoch replaces the table");
        assert_eq!(s.write().ok(), Some(()), "no file to write");
    }

    #[test]
    fn a_full_table_starts_a_new_epoch() {
        let s = SignOuts::in_memory();
        for i in 0..GENERATIONS_MAX {
            s.sign_out(&format!("u{i}")).unwrap();
        }
        assert_eq!(s.current("u1"), (0, 1));
        s.sign_out("one-more").unwrap();
        let (epoch, g) = s.current("u1");
        assert_ne!(epoch, 0, "everyone else signed out too");
        assert_eq!(g, 0);
        assert_eq!(s.current("one-more").1, 1);
    }
}
