//! A real `redis-server` for tests: started on a free loopback port with no
//! persistence, stopped on drop. A test that needs it is ignored with the reason
//! where it is not installed (the crate's `build.rs` emits `cfg(has_redis)` from
//! [`crate::tools`]); `.ci/run` installs it.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A `redis-server` on a free port, killed on drop.
#[derive(Debug)]
pub struct Redis {
    child: Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
    _dir: tempfile::TempDir,
}

impl Redis {
    /// Starts one on `port`, its working files in `dir`; `None` if it does not
    /// answer within 2 s.
    pub fn start_on(port: u16, dir: tempfile::TempDir) -> Option<Redis> {
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
            ])
            .args(["--appendonly", "no", "--dir"])
            .arg(dir.path())
            .stdout(Stdio::null())
            .spawn()
            .ok()?;
        let r = Redis {
            child,
            port,
            _dir: dir,
        };
        for _ in 0..200 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Some(r);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }

    /// Starts one on a free port; `None` (and a `SKIP` line) when `redis-server`
    /// is not installed.
    pub fn start() -> Option<Redis> {
        let found = Command::new("redis-server")
            .arg("--version")
            .output()
            .is_ok();
        if !found {
            eprintln!("SKIP: redis-server is not installed (apt-get install redis-server)");
            return None;
        }
        Redis::start_on(free_port(), tempfile::tempdir().unwrap())
    }

    /// Its `redis://` URL.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Kills it (as a crash would).
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Runs one command with `redis-cli`.
    pub fn cli(&self, args: &[&str]) -> String {
        let out = Command::new("redis-cli")
            .args(["-p", &self.port.to_string()])
            .args(args)
            .output()
            .expect("redis-cli runs");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.stop();
    }
}

pub use crate::free_port;
