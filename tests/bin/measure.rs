//! `measure OUT PROGRAM [ARGS...]`: run PROGRAM and write its peak resident
//! memory in KiB (`ru_maxrss` from `wait4`) to the file OUT; exit with its
//! exit code (128 + signal when killed).
//!
//! The end-to-end tests measure hel through this small process rather than
//! directly: `ru_maxrss` of a process includes the memory of the process it
//! was forked from (Linux records the old address space's peak at `exec`),
//! and the test runner is large. PROGRAM is forked from this one, which is
//! small.

use std::process::Command;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [out, program, rest @ ..] = args.as_slice() else {
        eprintln!("usage: measure OUT PROGRAM [ARGS...]");
        std::process::exit(2);
    };
    let child = match Command::new(program).args(rest).spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("measure: cannot run {program}: {e}");
            std::process::exit(2);
        }
    };
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4(2) on our own child with valid pointers.
    if unsafe { libc::wait4(pid, &mut status, 0, &mut usage) } != pid {
        eprintln!("measure: wait4: {}", std::io::Error::last_os_error());
        std::process::exit(2);
    }
    if let Err(e) = std::fs::write(out, format!("{}\n", usage.ru_maxrss)) {
        eprintln!("measure: {out}: {e}");
        std::process::exit(2);
    }
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128 + libc::WTERMSIG(status)
    };
    std::process::exit(code);
}
