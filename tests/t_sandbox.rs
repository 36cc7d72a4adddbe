//! The sandbox as an attacker sees it: commands the model runs must not see
//! or touch hel (its keys, its process, its lease), must not outlive it, and
//! must not be given a way to move the project or the store away.

use std::process::Child;
use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::json;

/// A value no test run shares with another.
fn unique() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("{}{nanos:09}", std::process::id())
}

/// Poll `done` every 10 ms for up to 20 s; panic naming `what` after that.
pub fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Wait for a hel process to exit, for up to 60 s.
fn wait_exit(child: &mut Child) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st.code().unwrap_or(-1);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("hel did not finish");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Processes whose command line contains `marker`, zombies excluded, as
/// the test sees them (from outside every sandbox: it sees every PID).
pub fn processes_with(marker: &str) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        let zombie = stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z'));
        if cmdline.contains(marker) && !zombie {
            out.push(format!("{name}: {cmdline}"));
        }
    }
    out
}

/// Reads every environment, command line and readable memory region of
/// every process it can see, and prints every `canary-…` it finds.
const SCANNER: &str = r#"
import os
NEEDLE = b"canary-"
hits = set()
seen = {"environ": 0, "cmdline": 0, "mem": 0, "denied": 0}
def scan(data, where):
    i = data.find(NEEDLE)
    while i >= 0:
        hits.add((where, data[i:i + 48].split(b"\0")[0]))
        i = data.find(NEEDLE, i + 1)
for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
    for kind in ("environ", "cmdline"):
        try:
            scan(open(f"/proc/{pid}/{kind}", "rb").read(), kind)
            seen[kind] += 1
        except OSError:
            seen["denied"] += 1
    try:
        maps = open(f"/proc/{pid}/maps").read().splitlines()
        with open(f"/proc/{pid}/mem", "rb", 0) as mem:
            for line in maps:
                addr, perms = line.split()[:2]
                lo, hi = (int(x, 16) for x in addr.split("-"))
                if "r" not in perms or hi - lo > (256 << 20):
                    continue
                try:
                    mem.seek(lo)
                    scan(mem.read(hi - lo), "mem")
                except (OSError, ValueError, OverflowError):
                    pass
        seen["mem"] += 1
    except OSError:
        seen["denied"] += 1
for k, v in os.environ.items():
    scan(f"{k}={v}".encode(), "env")
print("seen", seen)
for where, h in sorted(hits)[:300]:
    print(where, h.decode("latin1"))
"#;

#[test]
fn api_keys_are_nowhere_a_command_can_reach() {
    let p = Project::new();
    p.write("scan.py", SCANNER);
    let u = unique();
    let keys = [
        ("HEL_API_KEY", format!("canary-hel-{u}")),
        ("DEEPSEEK_API_KEY", format!("canary-deepseek-{u}")),
        ("OPENAI_API_KEY", format!("canary-openai-{u}")),
    ];
    let control = format!("canary-control-{u}");
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": format!(
            "env | grep -c API_KEY; CONTROL={control} python3 scan.py > scan.out 2>&1; cat scan.out; \
             cat /proc/1/environ; head -c 100 /proc/1/mem"
        )}))]},
        {"content": "done"},
    ]));
    let mut cmd = p.hel(Some(&mock));
    for (k, v) in &keys {
        cmd.env(k, v);
    }
    let run = Run::from_cmd(cmd.args(["--access", "auto", "-p", "x"]));
    assert_eq!(run.code, 0, "{}", run.stderr);
    let r = &tool_results(&mock, 1)[0];
    let written = p.read("scan.out");
    // The scan is real: it read environments and memory, and it found the
    // control value the command itself carries, in its environment, its
    // memory and its command line.
    assert!(r.starts_with("exit=") && r.contains("stdout:\n0\n"), "{r}");
    for place in ["env", "environ", "mem", "cmdline"] {
        assert!(
            written.contains(&format!("{place} {control}")),
            "the scanner did not find the control value in {place}:\n{written}"
        );
    }
    let seen = written.lines().find(|l| l.starts_with("seen ")).unwrap();
    assert!(
        !seen.contains("'mem': 0") && !seen.contains("'environ': 0"),
        "{seen}"
    );
    // PID 1 (the sandbox's init) keeps its environment and memory closed.
    assert!(
        r.contains("/proc/1/environ: Permission denied")
            && r.contains("/proc/1/mem")
            && r.contains("Permission denied"),
        "{r}"
    );
    for (name, key) in &keys {
        assert!(
            !r.contains(key.as_str()),
            "{name} reached the tool result:\n{r}"
        );
        assert!(
            !written.contains(key.as_str()),
            "{name} reached a file:\n{written}"
        );
    }
}

#[test]
fn a_command_cannot_kill_or_stop_hel() {
    let p = Project::new();
    p.write(
        "kill_hel.py",
        r#"
import os, signal
me, n = os.getpid(), 0
for pid in [p for p in os.listdir("/proc") if p.isdigit() and int(p) != me]:
    try:
        argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
    except OSError:
        continue
    if b"hel" in os.path.basename(argv[0]) or b"__sandbox-init" in argv:
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            try:
                os.kill(int(pid), sig)
                n += 1
            except OSError as e:
                print("kill", pid, sig, e)
print("signalled", n)
"#,
    );
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command":
            "for i in $(seq 1000); do [ -s hel.pid ] && break; sleep 0.02; done; \
             kill -STOP $PPID; kill -9 $PPID; echo ppid=$PPID; \
             kill -STOP $(cat hel.pid); kill -9 $(cat hel.pid); echo real=$?; \
             python3 kill_hel.py; kill -STOP -1; kill -9 -1; echo survived"
        }))]},
        {"tool_calls": [call("bash", json!({"command": "echo second-call"}))]},
        {"content": "done"},
    ]));
    let (mut hel, _sid) = p.spawn_session(Some(&mock), &["--access", "auto", "-p", "x"]);
    p.write("hel.pid", &format!("{}\n", hel.id()));
    let code = wait_exit(&mut hel);
    assert_eq!(code, 0);
    let r = tool_results(&mock, 2);
    assert!(r[0].contains("ppid=1\n"), "{}", r[0]);
    // hel's own PID does not exist where the command runs.
    assert!(
        r[0].contains("real=1\n") && r[0].contains("No such process"),
        "{}",
        r[0]
    );
    assert!(
        r[0].contains("signalled ") && r[0].contains("survived\n"),
        "{}",
        r[0]
    );
    assert!(
        r[1].starts_with("exit=0\nstdout:\nsecond-call\n"),
        "{}",
        r[1]
    );
    assert_eq!(mock.requests().len(), 3);
}

#[test]
fn nothing_a_command_started_outlives_hel() {
    let p = Project::new();
    let n = unique();
    let (head, tail) = n.split_at(4);
    // The marker is split in the command text: only the sleeps carry it.
    let mark = format!(".{n}");
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": format!(
            "N={head}; N=${{N}}{tail}; setsid sleep 300.$N </dev/null >/dev/null 2>&1 & \
             nohup sleep 301.$N >/dev/null 2>&1 & (sleep 302.$N &); \
             setsid bash -c \"sleep 303.$N & sleep 304.$N\" </dev/null >/dev/null 2>&1 & \
             for i in $(seq 250); do [ $(pgrep -fc \"^sleep 30[0-4].$N\") = 5 ] && break; sleep 0.02; done; \
             echo running=$(pgrep -fc \"^sleep 30[0-4].$N\")"
        )}))]},
        {"tool_calls": [call("bash", json!({"command": format!(
            "N={head}; N=${{N}}{tail}; echo still=$(pgrep -fc \"^sleep 30[0-4].$N\")"
        )}))]},
        {"content": "done"},
    ]));
    // The instruction's end waits for them up to the command time limit,
    // then kills them.
    let run = p.run(
        Some(&mock),
        &["--access", "auto", "--bash-timeout", "3", "-p", "x"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains("waiting up to 3 s for ")
            && run.stderr.contains("hel: warning: killed ")
            && run.stderr.contains(" the commands left running"),
        "{}",
        run.stderr
    );
    let r = tool_results(&mock, 2);
    assert!(r[0].starts_with("exit=0\nstdout:\nrunning=5\n"), "{}", r[0]);
    // They kept running after their call ended...
    assert!(r[1].starts_with("exit=0\nstdout:\nstill=5\n"), "{}", r[1]);
    // ...and none is left once hel has exited.
    assert_eq!(processes_with(&mark), Vec::<String>::new());
}

#[test]
fn commands_hold_no_extra_descriptor_no_capability_and_no_lease() {
    let p = Project::new();
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command":
            "echo fds:; ls -1 /proc/$$/fd; echo end; grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb)' /proc/self/status; \
             mknod dev-null c 1 3; echo mknod=$?; mknod dev-disk b 8 0; echo mknod=$?; \
             find .hel -name .active | wc -l; ls -a .hel/sessions/*/"
        }))]},
        {"content": "done"},
    ]));
    let run = p.run(Some(&mock), &["--access", "auto", "-p", "x"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let r = &tool_results(&mock, 1)[0];
    assert!(r.contains("fds:\n0\n1\n2\nend\n"), "{r}");
    for set in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert!(
            r.contains(&format!("{set}:\t0000000000000000\n")),
            "{set}: {r}"
        );
    }
    assert!(r.contains("mknod=1\nmknod=1\n"), "{r}");
    assert!(r.contains("Operation not permitted"), "{r}");
    assert!(!p.path().join("dev-null").exists() && !p.path().join("dev-disk").exists());
    // The session's directory shows only its spill directory: no lease.
    assert!(r.contains("\n0\n.\n..\nspill\n"), "{r}");
}

#[test]
fn allow_write_that_could_move_the_project_or_the_store_is_refused() {
    let p = Project::new();
    std::fs::create_dir_all(p.path().join(".hel/sessions")).unwrap();
    // SAFETY: geteuid(2) cannot fail.
    let uid = unsafe { libc::geteuid() };
    let runs = std::env::temp_dir().join(format!("hel-runs-{uid}"));
    std::fs::create_dir_all(&runs).unwrap();
    let parent = p.path().parent().unwrap().to_owned();
    let mock = Mock::start(json!([{"content": "never"}]));
    for dir in [
        parent.clone(),
        std::env::temp_dir(),
        p.path(),
        p.path().join(".hel"),
        p.path().join(".hel/sessions"),
        runs.clone(),
        p.path().join("missing"),
    ] {
        // hel's temporary directory is the test's, whatever TMPDIR says.
        let run = Run::from_cmd(
            p.hel(Some(&mock))
                .env("TMPDIR", std::env::temp_dir())
                .args(["--access", "auto", "--allow-write"])
                .arg(&dir)
                .args(["-p", "x"]),
        );
        assert_eq!(run.code, 2, "{}: {}", dir.display(), run.stderr);
        assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
        assert!(
            run.stderr.starts_with("hel: --allow-write "),
            "{}",
            run.stderr
        );
    }
    assert!(mock.requests().is_empty(), "nothing started");
    assert_eq!(
        std::fs::read_dir(p.path().join(".hel/sessions"))
            .unwrap()
            .count(),
        0
    );
    // A directory elsewhere is fine, and writable.
    let outside = Outside::new();
    let target = outside.path().join("made-by-command");
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": format!("echo ok > {}", target.display())}))]},
        {"content": "done"},
    ]));
    let run = p.run(
        Some(&mock),
        &[
            "--access",
            "auto",
            "--allow-write",
            outside.path().to_str().unwrap(),
            "-p",
            "x",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "ok\n");
}

#[test]
fn a_server_started_in_one_call_answers_the_next() {
    let p = Project::new();
    p.write(
        "server.py",
        r#"
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen()
print("listening", flush=True)
open("port.tmp", "w").write(str(s.getsockname()[1]))
import os; os.rename("port.tmp", "port")
c, _ = s.accept()
# Written after its call ended: a closed pipe would kill it here.
print("accepted " * 10000, flush=True)
c.sendall(b"hello-from-server")
c.close()
"#,
    );
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command":
            "python3 server.py & for i in $(seq 500); do [ -e port ] && break; sleep 0.02; done; echo started"
        }))]},
        {"tool_calls": [call("bash", json!({"command":
            "exec 3<>/dev/tcp/127.0.0.1/$(cat port); cat <&3"
        }))]},
        {"content": "done"},
    ]));
    let started = Instant::now();
    let run = p.run(Some(&mock), &["--access", "auto", "-p", "x"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // The first call ended with bash, not with the server.
    assert!(started.elapsed() < Duration::from_secs(20));
    let r = tool_results(&mock, 2);
    assert!(r[0].starts_with("exit=0\nstdout:\n"), "{}", r[0]);
    assert!(r[0].contains("started\n"), "{}", r[0]);
    assert!(
        r[1].starts_with("exit=0\nstdout:\nhello-from-server\n"),
        "{}",
        r[1]
    );
}

#[test]
fn a_sandbox_that_dies_fails_its_call_and_the_next_call_gets_a_new_one() {
    let p = Project::new();
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": "touch ready; sleep 100"}))]},
        {"tool_calls": [call("bash", json!({"command": "echo fresh; ps -eo pid,args"}))]},
        {"content": "done"},
    ]));
    let (mut hel, _sid) = p.spawn_session(Some(&mock), &["--access", "auto", "-p", "x"]);
    wait_until("the first command", || p.path().join("ready").exists());
    // The sandbox's init: a `hel __sandbox-init <hel pid>` whose parent is
    // not hel (that one is the helper that created the namespaces).
    let me = format!("__sandbox-init {}", hel.id());
    let init: Vec<i32> = processes_with(&me)
        .iter()
        .filter_map(|l| l.split(':').next()?.parse().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let ppid: u32 = stat
                .rsplit_once(") ")
                .and_then(|(_, r)| r.split(' ').nth(1)?.parse().ok())
                .unwrap_or(0);
            ppid != hel.id()
        })
        .collect();
    assert_eq!(init.len(), 1, "{:?}", processes_with(&me));
    // SAFETY: kill(2) of a process this test started (through hel).
    unsafe { libc::kill(init[0], libc::SIGKILL) };
    assert_eq!(wait_exit(&mut hel), 0);
    let r = tool_results(&mock, 2);
    assert!(
        r[0].starts_with("error: the sandbox stopped during the command"),
        "{}",
        r[0]
    );
    assert!(r[1].starts_with("exit=0\nstdout:\nfresh\n"), "{}", r[1]);
    assert!(!r[1].contains("sleep 100"), "{}", r[1]);
}

#[test]
fn many_hel_processes_starting_together_all_get_an_instance() {
    // The focused thousand-start test is the instance module's own
    // (threads); this is the same race through the real binary.
    const N: usize = 48;
    let p = Project::new();
    let tmp = tempfile::tempdir().unwrap();
    let replies: Vec<_> = (0..N).map(|_| json!({"content": "ok"})).collect();
    let mock = Mock::start(json!(replies));
    let children: Vec<_> = (0..N)
        .map(|_| {
            p.hel(Some(&mock))
                .env("TMPDIR", tmp.path())
                .args(["--tools", "none", "-p", "x"])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // SAFETY: geteuid(2) cannot fail.
    let uid = unsafe { libc::geteuid() };
    let left: Vec<_> = std::fs::read_dir(tmp.path().join(format!("hel-runs-{uid}")))
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// A fresh pseudo-terminal: the side hel gets, the side the test reads
/// and types on, and its name (`/dev/pts/N`).
struct Pty {
    master: std::fs::File,
    slave: std::fs::File,
    name: String,
}

impl Pty {
    fn open() -> Pty {
        use std::os::fd::{AsRawFd, FromRawFd};
        let (mut master, mut slave) = (0, 0);
        // SAFETY: openpty(3) fills in two descriptors; no name or settings asked for.
        let got = unsafe {
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        assert_eq!(got, 0);
        // SAFETY: both descriptors were just opened for us and are owned here only.
        let (master, slave) = unsafe {
            (
                std::fs::File::from_raw_fd(master),
                std::fs::File::from_raw_fd(slave),
            )
        };
        let name = std::fs::read_link(format!("/proc/self/fd/{}", slave.as_raw_fd()))
            .unwrap()
            .display()
            .to_string();
        assert!(name.starts_with("/dev/pts/"), "{name}");
        Pty {
            master,
            slave,
            name,
        }
    }
}

/// hel on a pseudo-terminal that is its controlling terminal, as when you
/// run it from your shell; what it shows is collected as it comes.
struct OnTty {
    child: Child,
    master: std::fs::File,
    shown: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
}

/// The end of every prompt (`hel 4da5b0e0 · 12% › `).
const PROMPT_END: &str = "% › ";

impl OnTty {
    /// Start `hel args` on `pty`. With `leak`, hel also gets that file as
    /// descriptor 7, not close-on-exec: a parent that leaks one.
    fn start(
        pty: Pty,
        p: &Project,
        mock: &Mock,
        args: &[&str],
        leak: Option<&std::fs::File>,
    ) -> OnTty {
        use std::os::fd::AsRawFd;
        use std::os::unix::process::CommandExt;
        let leak = leak.map(|f| f.as_raw_fd());
        let mut cmd = std::process::Command::new(hel_bin());
        cmd.current_dir(p.dir.path())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", p.home.path())
            .env("TERM", "xterm")
            .args(["--base-url", &mock.url, "--model", "mock-model"])
            .args(args)
            .stdin(pty.slave.try_clone().unwrap())
            .stdout(pty.slave.try_clone().unwrap())
            .stderr(pty.slave);
        // SAFETY: only async-signal-safe system calls between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                rustix::process::setsid()?;
                if libc::ioctl(0, libc::TIOCSCTTY, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // What the test process holds stays with it; only `leak`
                // goes along, as fd 7 without close-on-exec.
                libc::close_range(3, u32::MAX, libc::CLOSE_RANGE_CLOEXEC as libc::c_int);
                if let Some(fd) = leak {
                    if libc::dup2(fd, 7) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        let child = cmd.spawn().unwrap();
        // The command held our copies of the slave side: reading the
        // master ends (EIO) once hel and its sandbox are gone.
        drop(cmd);
        let shown = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = shown.clone();
        let mut reader = pty.master.try_clone().unwrap();
        std::thread::spawn(move || {
            use std::io::Read;
            let mut buf = [0u8; 4096];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        OnTty {
            child,
            master: pty.master,
            shown,
        }
    }

    /// Everything shown so far.
    fn shown(&self) -> String {
        String::from_utf8_lossy(&self.shown.lock().unwrap()).into_owned()
    }

    /// Wait until `text` has been shown `n` times.
    fn wait_shown(&self, text: &str, n: usize) {
        wait_until(&format!("{n} × {text:?} in {:?}", self.shown()), || {
            self.shown().matches(text).count() >= n
        });
    }

    /// Type `keys`.
    fn type_in(&mut self, keys: &str) {
        use std::io::Write;
        self.master.write_all(keys.as_bytes()).unwrap();
        self.master.flush().unwrap();
    }

    /// Leave with Ctrl-D at the prompt; hel's exit code.
    fn leave(mut self) -> i32 {
        self.type_in("\x04");
        wait_exit(&mut self.child)
    }
}

/// The pid of hel's process on `tty`.
fn pid_of(tty: &OnTty) -> u32 {
    tty.child.id()
}

#[test]
fn commands_reach_no_terminal_of_the_user() {
    let p = Project::new();
    let pty = Pty::open();
    // The command is told which terminal hel runs on (an attacker would
    // try them all, as the loop does too).
    let user = pty.name.clone();
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": format!(
            "echo dev: $(ls -A /dev); \
             for t in /dev/tty /dev/console {user} /dev/pts/[0-9]* /dev/tty[0-9]*; do \
               (printf '\\033[2JPWNED' > \"$t\") 2>/dev/null && echo \"wrote $t\"; done; \
             (: < /dev/tty) 2>&1 | sed 's/.*: /tty: /'; \
             bash -c 'if exec 3<{user}; then echo open > thief.status; exec cat <&3 > stolen; else echo failed > thief.status; fi' 2>thief.err & \
             for i in $(seq 1000); do [ -s thief.status ] && break; sleep 0.01; done; cat thief.status; \
             python3 -c 'import os; m, s = os.openpty(); print(\"own pty\", os.ttyname(s))'"
        )}))]},
        {"content": "done"},
        {"content": "ok"},
    ]));
    let mut tty = OnTty::start(pty, &p, &mock, &["--access", "auto"], None);
    tty.wait_shown(PROMPT_END, 1);
    tty.type_in("go\r");
    tty.wait_shown(PROMPT_END, 2);
    // Typed at hel's prompt while the command's thief would be reading.
    tty.type_in("my password is hunter2\r");
    tty.wait_shown(PROMPT_END, 3);
    let shown = tty.shown();
    assert_eq!(tty.leave(), 0);
    let r = &tool_results(&mock, 1)[0];
    // Only the harmless devices, and terminals of the sandbox's own.
    assert!(
        r.contains("dev: fd full null ptmx pts random stderr stdin stdout tty urandom zero\n"),
        "{r}"
    );
    assert!(!r.contains("wrote "), "{r}");
    assert!(r.contains("tty: No such device or address\n"), "{r}");
    assert!(r.contains("\nfailed\n"), "{r}");
    assert!(r.contains("own pty /dev/pts/0\n"), "{r}");
    assert!(!shown.contains("PWNED"), "{shown}");
    let typed = mock.messages(2);
    let typed = typed.iter().rev().find(|m| m["role"] == "user").unwrap();
    assert_eq!(typed["content"], "my password is hunter2");
    assert_eq!(
        std::fs::read_to_string(p.path().join("stolen")).unwrap_or_default(),
        ""
    );
}

/// hel's descriptors (but 0-2 and `except`) that are not close-on-exec,
/// and whether one of them is a session journal.
fn inheritable_fds(pid: u32, except: &[u32]) -> (Vec<String>, bool) {
    let mut open = Vec::new();
    let mut journal = false;
    for e in std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
    {
        let fd: u32 = e.file_name().to_string_lossy().parse().unwrap();
        let target = std::fs::read_link(e.path()).unwrap_or_default();
        journal |= target.to_string_lossy().ends_with(".journal");
        if fd <= 2 || except.contains(&fd) {
            continue;
        }
        let info = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}")).unwrap_or_default();
        let flags = info
            .lines()
            .find_map(|l| l.strip_prefix("flags:"))
            .map(|f| u32::from_str_radix(f.trim(), 8).unwrap())
            .unwrap_or(0);
        if flags & libc::O_CLOEXEC as u32 == 0 {
            open.push(format!("{fd} -> {}", target.display()));
        }
    }
    (open, journal)
}

#[test]
fn commands_inherit_no_descriptor_of_hel_or_of_its_parent() {
    let outside = Outside::new();
    let leaked = outside.path().join("leaked-by-parent");
    std::fs::write(&leaked, "parent's\n").unwrap();
    let leak = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&leaked)
        .unwrap();
    for args in [
        &["--access", "auto"][..],
        &["--access", "auto", "--no-sandbox"],
    ] {
        let p = Project::new();
        // (ls into a file, so that bash opens nothing while it is looked at.)
        let list = "ls -l /proc/$$/fd > fds; awk 'NR > 1 { print \"fd\", $9, $11 }' fds; \
                    echo x >&7 && echo wrote-7; \
                    (: < /dev/tty) 2>/dev/null && echo tty-open || echo tty-closed";
        let mock = Mock::start(json!([
            {"tool_calls": [call("bash", json!({"command": list}))]},
            {"content": "first"},
            {"tool_calls": [call("bash", json!({"command": list}))]},
            {"content": "second"},
        ]));
        let mut tty = OnTty::start(Pty::open(), &p, &mock, args, Some(&leak));
        tty.wait_shown(PROMPT_END, 1);
        tty.type_in("one\r");
        tty.wait_shown(PROMPT_END, 2);
        // The first answer is committed: the session's journal is open in
        // hel, and nothing hel holds would cross an exec but what its
        // parent gave it.
        let (open, journal) = inheritable_fds(pid_of(&tty), &[7]);
        assert!(journal, "{args:?}: no journal open");
        assert_eq!(open, Vec::<String>::new(), "{args:?}");
        tty.type_in("two\r");
        tty.wait_shown(PROMPT_END, 3);
        assert_eq!(tty.leave(), 0);
        // The first call's result is in request 1, the second's in 3.
        for (i, request) in [(0, 1), (1, 3)] {
            let r = &tool_results(&mock, request)[i];
            let fds: Vec<&str> = r.lines().filter(|l| l.starts_with("fd ")).collect();
            assert_eq!(fds.len(), 3, "{args:?} call {i}: {r}");
            for (n, l) in fds.iter().enumerate() {
                assert!(l.starts_with(&format!("fd {n} ")), "{args:?}: {r}");
            }
            assert!(
                !r.contains("wrote-7") && r.contains("Bad file descriptor"),
                "{args:?}: {r}"
            );
            // No controlling terminal: /dev/tty is not hel's.
            assert!(r.contains("tty-closed\n"), "{args:?}: {r}");
        }
    }
    assert_eq!(std::fs::read_to_string(&leaked).unwrap(), "parent's\n");
}

/// `git args` in `dir`, which must succeed; its stdout. No global or
/// system configuration is read.
pub fn git(dir: &std::path::Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.org"])
        .args(["-c", "init.defaultBranch=main"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A project that is a git repository with one commit, and a nested
/// repository in `vendor/lib`.
fn repository() -> Project {
    let p = Project::new();
    git(&p.path(), &["init", "-q"]);
    p.write("a.txt", "a\n");
    git(&p.path(), &["add", "a.txt"]);
    git(&p.path(), &["commit", "-qm", "one"]);
    std::fs::create_dir_all(p.path().join("vendor/lib")).unwrap();
    git(&p.path().join("vendor/lib"), &["init", "-q"]);
    p
}

/// What a command run by a model tries in a repository: plant a hook and
/// config, move the git directory away, commit.
const PLANT: &str = "echo evil > .git/hooks/pre-commit; \
     printf '[core]\\n\\tfsmonitor = evil\\n' >> .git/config; \
     mv .git moved; \
     echo evil > vendor/lib/.git/hooks/post-checkout; \
     echo b > b.txt; git add b.txt && git -c user.name=t -c user.email=t@e commit -qm two; echo commit=$?; \
     git config core.pager evil; echo config=$?";

#[test]
fn git_directories_are_read_only_to_commands() {
    let p = repository();
    let config = p.read(".git/config");
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": format!("{PLANT}; rm -rf .git")}))]},
        {"tool_calls": [call("bash", json!({"command":
            "git init -q fresh && echo planted > fresh/.git/hooks/pre-commit && echo same-call"}))]},
        {"tool_calls": [call("bash", json!({"command":
            "echo again > fresh/.git/hooks/pre-commit || echo refused"}))]},
        {"content": "done"},
    ]));
    let run = p.run(Some(&mock), &["--access", "auto", "-p", "x"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let r = tool_results(&mock, 3);
    for refused in [
        ".git/hooks/pre-commit: Read-only file system",
        ".git/config: Read-only file system",
        "mv: cannot move '.git' to 'moved': Device or resource busy",
        "vendor/lib/.git/hooks/post-checkout: Read-only file system",
        "index.lock': Read-only file system",
        "commit=128\n",
        "config=",
    ] {
        assert!(r[0].contains(refused), "{refused}: {}", r[0]);
    }
    assert!(!r[0].contains("config=0"), "{}", r[0]);
    // Nothing of it reached the repositories.
    assert!(!p.path().join(".git/hooks/pre-commit").exists());
    assert!(!p
        .path()
        .join("vendor/lib/.git/hooks/post-checkout")
        .exists());
    assert!(!p.path().join("moved").exists());
    assert_eq!(p.read(".git/config"), config);
    assert!(p.path().join(".git/HEAD").exists());
    assert_eq!(git(&p.path(), &["log", "--oneline"]).lines().count(), 1);
    assert_eq!(
        git(&p.path(), &["status", "--short"]),
        "?? b.txt\n?? fresh/\n?? vendor/\n"
    );
    // A repository a command creates is read-only from the next command on;
    // what that same command wrote there is not prevented, and said.
    assert!(
        r[1].contains("note: this command created fresh/.git: read-only from the next command on"),
        "{}",
        r[1]
    );
    assert!(r[1].contains("same-call"), "{}", r[1]);
    assert!(
        run.stderr
            .contains("hel: warning: a command created fresh/.git during the run"),
        "{}",
        run.stderr
    );
    assert!(
        r[2].starts_with("note: the sandbox was rebuilt"),
        "{}",
        r[2]
    );
    assert!(
        r[2].contains("fresh/.git/hooks/pre-commit: Read-only file system")
            && r[2].contains("refused"),
        "{}",
        r[2]
    );
    assert_eq!(p.read("fresh/.git/hooks/pre-commit"), "planted\n");
}

#[test]
fn a_worktrees_git_file_and_its_git_directories_are_read_only() {
    let main = tempfile::tempdir().unwrap();
    let main = main.path().canonicalize().unwrap();
    git(&main, &["init", "-q"]);
    git(&main, &["commit", "-q", "--allow-empty", "-m", "one"]);
    let p = Project::new();
    git(
        &main,
        &[
            "worktree",
            "add",
            "-q",
            p.path().to_str().unwrap(),
            "-b",
            "wt",
        ],
    );
    let pointer = p.read(".git");
    let common = std::fs::read_to_string(main.join(".git/config")).unwrap();
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": format!(
            "printf 'gitdir: {0}/evil\\n' > .git; rm -f .git; mv .git g; \
             echo evil >> $(git rev-parse --git-common-dir)/config; \
             echo evil > $(git rev-parse --git-dir)/commondir; \
             git status --short; echo status=$?",
            p.path().display()
        )}))]},
        {"content": "done"},
    ]));
    let run = p.run(Some(&mock), &["--access", "auto", "-p", "x"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let r = &tool_results(&mock, 1)[0];
    assert!(r.contains(".git: Read-only file system"), "{r}");
    assert!(
        r.contains("rm: cannot remove '.git': Device or resource busy"),
        "{r}"
    );
    assert!(
        r.contains("mv: cannot move '.git' to 'g': Device or resource busy"),
        "{r}"
    );
    assert!(r.contains("/.git/config: Read-only file system"), "{r}");
    assert!(r.contains("/commondir: Read-only file system"), "{r}");
    // Reading the repository works.
    assert!(r.contains("status=0\n"), "{r}");
    assert_eq!(p.read(".git"), pointer);
    assert_eq!(
        std::fs::read_to_string(main.join(".git/config")).unwrap(),
        common
    );
}

#[test]
fn allow_git_write_lets_commands_commit_but_not_plant() {
    let p = repository();
    let config = p.read(".git/config");
    // The config file's key, as the flag would.
    std::fs::create_dir_all(p.home.path().join(".config/hel")).unwrap();
    std::fs::write(
        p.home.path().join(".config/hel/config.toml"),
        "allow_git_write = true\n",
    )
    .unwrap();
    let shown = p.run(None, &["config"]);
    let row = shown
        .stdout
        .lines()
        .find(|l| l.starts_with("allow_git_write"))
        .unwrap_or("");
    assert!(
        row.contains(" true ") && row.contains("config.toml"),
        "{}",
        shown.stdout
    );
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": PLANT}))]},
        {"content": "done"},
    ]));
    let run = p.run(Some(&mock), &["--access", "auto", "-p", "x"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let r = &tool_results(&mock, 1)[0];
    for refused in [
        ".git/hooks/pre-commit: Read-only file system",
        ".git/config: Read-only file system",
        "mv: cannot move '.git' to 'moved': Device or resource busy",
        "vendor/lib/.git/hooks/post-checkout: Read-only file system",
        "commit=0\n",
    ] {
        assert!(r.contains(refused), "{refused}: {r}");
    }
    assert!(!r.contains("config=0"), "{r}");
    assert!(!p.path().join(".git/hooks/pre-commit").exists());
    assert!(!p
        .path()
        .join("vendor/lib/.git/hooks/post-checkout")
        .exists());
    assert_eq!(p.read(".git/config"), config);
    assert_eq!(git(&p.path(), &["log", "--oneline"]).lines().count(), 2);
    assert!(!p.path().join("moved").exists());
}
