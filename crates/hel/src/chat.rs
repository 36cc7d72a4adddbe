//! An agent run on the command line: instructions from `-p` or stdin,
//! answers on stdout, Ctrl-C, and the exit code.

use std::io::IsTerminal;
use std::rc::Rc;
use std::sync::Arc;

use hel_agent::{Host, Interrupts, Observer, Outcome, Run, Start, Termination};
use tokio::io::{AsyncBufReadExt, BufReader, Lines, Stdin};

use std::time::Instant;

use crate::cli::{OutputFormat, RunArgs};
use crate::exit::{Exit, Usage};
use crate::output::{self, Finished, JsonOut};
use crate::render::{self, live::Live};
use crate::running::{forward_ctrl_c, incomplete_line, restore_forked};
use crate::tty::Tty;

/// Exit code of a run ended by Ctrl-C.
const INTERRUPTED: u8 = 130;

/// Run hel as an agent. Returns the exit code. With no `-p` and stdin a
/// terminal, this is the interactive prompt ([`crate::prompt`]); else
/// instructions come from `-p`, or one per line from stdin.
pub async fn run(args: RunArgs, start: Start, restore_files: Option<bool>) -> Result<u8, Exit> {
    let format = args.output_format;
    if args.include_partial && format != OutputFormat::StreamJson {
        return Err(Usage::PartialNeedsStreamJson.into());
    }
    if args.instructions.is_empty() && std::io::stdin().is_terminal() {
        if format != OutputFormat::Text {
            return Err(Usage::JsonNotInteractive.into());
        }
        return crate::prompt::run(args, start, restore_files).await;
    }
    let (interrupter, interrupts) = hel_agent::interrupts();
    let live = Rc::new(Live::new());
    if let Some(intro) = args.intro(false) {
        live.introduce(intro);
    }
    let json = (format != OutputFormat::Text).then(|| {
        Rc::new(JsonOut::new(
            format == OutputFormat::StreamJson,
            args.include_partial,
        ))
    });
    // On a terminal, the same signs of life as at the prompt (text only:
    // the JSON formats report every event on stdout).
    let spinner = crate::prompt::spinner::Spinner::default();
    let observer: Rc<dyn Observer> = match &json {
        Some(j) => j.clone(),
        None => Rc::new(crate::prompt::Watched {
            spinner: spinner.clone(),
            live: Rc::clone(&live),
            asks: Rc::new(std::cell::Cell::new(
                args.access == crate::cli::Access::Confirm,
            )),
        }),
    };
    let host = Host {
        observer,
        confirm: Arc::new(Tty::default()),
        interrupts: interrupts.clone(),
    };
    let options = args.options();
    let access = args.access.name();
    let mut run = Run::start(options, start, host)?;
    if let Some(j) = &json {
        j.started(&run, access);
    }
    if let Some(force) = restore_files {
        restore_forked(&mut run, force)?;
    }
    forward_ctrl_c(interrupter);
    let from_stdin = args.instructions.is_empty();
    let mut instructions = args.instructions.into_iter();
    let mut stdin = BufReader::new(tokio::io::stdin()).lines();
    let mut failed = false;
    let mut last_unsaved = false;
    loop {
        let text = if from_stdin {
            match next_line(&mut stdin, &interrupts).await {
                Line::Text(t) => t,
                Line::End => break,
                Line::Interrupted => {
                    run.finish();
                    return Ok(INTERRUPTED);
                }
                Line::Unreadable(e) => {
                    render::line(&format!("hel: cannot read stdin: {e}"));
                    failed = true;
                    break;
                }
            }
        } else {
            match instructions.next() {
                Some(t) => t,
                None => break,
            }
        };
        let began = Instant::now();
        if json.is_none() {
            spinner.start();
        }
        let outcome = run.instruction(&text).await;
        spinner.stop();
        // An answer a script cannot come back to is not a success: the
        // warning said why it was not saved. A later answer that is saved
        // saves it too, so the run's exit code asks only of the last.
        let unsaved = run.answer_unsaved();
        if matches!(outcome, Outcome::Completed(_)) {
            last_unsaved = unsaved;
        }
        if let Some(j) = &json {
            let usage = run.status().usage;
            j.result(&Finished {
                outcome: &outcome,
                input_tokens: usage.input_tokens,
                output_tokens: usage.output_tokens,
                estimated: usage.estimated,
                duration: began.elapsed(),
                exit: if unsaved {
                    1
                } else {
                    output::exit_status(&outcome)
                },
            });
        }
        match outcome {
            Outcome::Completed(answer) if json.is_none() => live.answer(&answer),
            Outcome::Completed(_) => {}
            Outcome::Incomplete(why) => {
                let t = why.termination();
                render::line(&incomplete_line(&why));
                failed = true;
                if t == Termination::Interrupted && !from_stdin {
                    run.finish();
                    return Ok(INTERRUPTED);
                }
                if !from_stdin {
                    break;
                }
            }
        }
    }
    run.finish();
    Ok(if failed || last_unsaved { 1 } else { 0 })
}

/// The next instruction read from stdin.
enum Line {
    Text(String),
    /// EOF or `/exit`.
    End,
    Interrupted,
    Unreadable(std::io::Error),
}

/// Read lines until one holds an instruction (blank lines are skipped).
async fn next_line(stdin: &mut Lines<BufReader<Stdin>>, interrupts: &Interrupts) -> Line {
    let seen = interrupts.count();
    loop {
        let line = tokio::select! {
            l = stdin.next_line() => l,
            _ = interrupts.after(seen) => return Line::Interrupted,
        };
        return match line {
            Ok(Some(l)) if l.trim() == "/exit" => Line::End,
            Ok(Some(l)) if l.trim().is_empty() => continue,
            Ok(Some(l)) => Line::Text(l),
            Ok(None) => Line::End,
            Err(e) => Line::Unreadable(e),
        };
    }
}
