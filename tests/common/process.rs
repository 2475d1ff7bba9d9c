//! Server processes a test starts (the example servers, the limits server): spawned with
//! their stderr kept, ready once they print their address, signalled, killed, waited for,
//! and killed on drop whatever the test did.

use std::{
    io::{BufRead as _, BufReader},
    process::{Child, Command, ExitStatus, Stdio},
    sync::{Arc, Mutex, mpsc},
    thread::JoinHandle,
    time::{Duration, Instant},
};

/// How long a process may take to print that it is ready.
const READY_WITHIN: Duration = Duration::from_secs(60);

/// One process a test started; killed on drop.
pub struct Process {
    name: String,
    child: Child,
    /// Every line it printed so far, on the stream read (stderr, or stdout for `start_stdout`).
    lines: Arc<Mutex<Vec<String>>>,
    reader: Option<JoinHandle<()>>,
}

impl Process {
    /// Spawns `command` as `name` (stdout discarded, every stderr line kept by a thread of its
    /// own, so the process never blocks on a full pipe), then waits for the first stderr line
    /// that `ready` maps to a value. Panics, with the lines printed, when the process ends or
    /// stays silent for a minute first.
    pub fn start<T>(
        name: &str,
        command: &mut Command,
        ready: impl FnMut(&str) -> Option<T>,
    ) -> (Self, T) {
        command.stdout(Stdio::null()).stderr(Stdio::piped());
        Self::read(name, command, ready)
    }

    /// [`Process::start`] reading its stdout instead (its stderr discarded): for a test
    /// binary that runs one of its own tests as the server, whose harness prints there.
    pub fn start_stdout<T>(
        name: &str,
        command: &mut Command,
        ready: impl FnMut(&str) -> Option<T>,
    ) -> (Self, T) {
        command.stdout(Stdio::piped()).stderr(Stdio::null());
        Self::read(name, command, ready)
    }

    fn read<T>(
        name: &str,
        command: &mut Command,
        mut ready: impl FnMut(&str) -> Option<T>,
    ) -> (Self, T) {
        let mut child = command
            .spawn()
            .unwrap_or_else(|error| panic!("start {name}: {error}"));
        let output: Box<dyn std::io::Read + Send> = match child.stderr.take() {
            Some(stderr) => Box::new(stderr),
            None => Box::new(child.stdout.take().expect("stdout or stderr piped")),
        };
        let output = BufReader::new(output);
        let lines = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::channel();
        let kept = Arc::clone(&lines);
        let reader = std::thread::spawn(move || {
            for line in output.lines().map_while(Result::ok) {
                kept.lock().unwrap().push(line.clone());
                let _ = tx.send(line);
            }
        });
        let process = Self {
            name: name.to_owned(),
            child,
            lines,
            reader: Some(reader),
        };
        let started = Instant::now();
        let value = loop {
            let left = READY_WITHIN.saturating_sub(started.elapsed());
            match rx.recv_timeout(left) {
                Ok(line) => {
                    if let Some(value) = ready(&line) {
                        break value;
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    panic!("{name} exited before it was ready: {:?}", process.lines())
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    panic!(
                        "{name} not ready within {READY_WITHIN:?}: {:?}",
                        process.lines()
                    )
                }
            }
        };
        (process, value)
    }

    /// [`Process::start`] until it prints `serving MCP on <url>`: the process and the URL.
    pub fn serving(name: &str, command: &mut Command) -> (Self, String) {
        Self::start(name, command, |line| {
            line.strip_prefix("serving MCP on ").map(str::to_owned)
        })
    }

    /// The name it was started with.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Every line it printed so far (on the stream read).
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// Sends it `signal` (as `kill` takes it: `-TERM`, `-STOP`, `-CONT`).
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill {signal} {}", self.name);
    }

    /// SIGKILL, and its end: no destructor, no drain, no release; its leases lapse.
    pub fn kill9(&mut self) {
        self.child.kill().expect("kill -9");
        self.child.wait().expect("wait");
    }

    /// Waits for its exit (panics after `bound`): its exit status and every stderr line it
    /// printed, to the last.
    pub fn exited(&mut self, bound: Duration) -> (ExitStatus, Vec<String>) {
        let started = Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                break status;
            }
            assert!(
                started.elapsed() < bound,
                "{} did not exit within {bound:?}: {:?}",
                self.name,
                self.lines()
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        (status, self.lines())
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A test's scratch directory (the processes' journals, a database file): made empty, and
/// removed on drop, unless the test failed (it panics): then it stays for a look, and its
/// path is printed.
pub struct Scratch(std::path::PathBuf);

impl Scratch {
    /// `mcp-tasks-{name}-{pid}` in the system's temporary directory.
    pub fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("mcp-tasks-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        Self(dir)
    }
}

impl std::ops::Deref for Scratch {
    type Target = std::path::Path;

    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("the test's files are kept in {}", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}
