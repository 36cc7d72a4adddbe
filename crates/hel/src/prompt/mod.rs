//! The interactive prompt, when hel runs with no `-p` and stdin is a
//! terminal: a line editor ([`editor`]) showing the session and how full
//! the context is (`hel 4da5b0e0 · 12% › `), a history kept per user
//! ([`history`]), slash commands ([`slash`]), a spinner while the model
//! is silent ([`spinner`]) and one line of token use after each answer.
//!
//! Ctrl-C while an instruction runs cancels it (it ends incomplete, as an
//! interrupt always does) and the prompt comes back; an instruction that
//! got no answer is carried into the next one (or sent again by
//! `/retry`). Ctrl-C twice within a second on an empty line, Ctrl-D, or
//! `/exit` leaves with exit code 0, saying how to come back.

mod access;
mod attach;
mod complete;
mod editor;
mod history;
mod init;
mod models;
mod slash;
pub(crate) mod spinner;

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;

use clap::Parser;
use hel_agent::{
    Event, Host, Interrupter, Interrupts, Observer, Options, Outcome, Run, Start, Status,
};

use crate::cli::{Cli, Command, RunArgs};
use crate::exit::{Exit, Failure, Refusal, Usage};
use crate::note;
use crate::render::{self, live::Live};
use crate::running;
use editor::{Ask, Editor, Read};
use history::History;
use slash::Slash;
use spinner::Spinner;

/// Renders events as [`Live`] does, with the spinner on while a request
/// waits for its first sign of an answer (again after each tool round),
/// and while a tool runs that asks nothing (one that waits for the
/// confirm question has the terminal to itself).
pub(crate) struct Watched {
    pub spinner: Spinner,
    pub live: Rc<Live>,
    /// Writes and commands are asked about first (`--access confirm`;
    /// `/access` changes it).
    pub asks: Rc<Cell<bool>>,
}

impl Observer for Watched {
    fn event(&self, event: Event) {
        // A running command's output: under the spinner (started for it
        // when the call was confirmed first), nowhere else.
        if let Event::ToolOutput(data) = &event {
            if !self.spinner.drawing() {
                self.spinner.start_for("running bash".to_owned());
            }
            self.spinner.feed(data);
            return;
        }
        let tool = match &event {
            Event::ToolStarted { name, .. } => {
                let reads = hel_agent::ToolName::parse(name).is_some_and(|t| t.only_reads());
                (reads || !self.asks.get()).then(|| format!("running {name}"))
            }
            _ => None,
        };
        if matches!(event, Event::Waiting) {
            self.spinner.start();
        } else {
            self.spinner.stop();
        }
        self.live.event(event);
        if let Some(what) = tool {
            self.spinner
                .start_for(hel_agent::text::escape_line(&what).into_owned());
        }
    }
}

/// The prompt's state: the run (replaced by `/fork`), how to start
/// another, and the terminal.
struct Prompt {
    run: Run,
    options: Options,
    editor: Editor,
    history: Option<History>,
    spinner: Spinner,
    /// Shows answers as they arrive; prints them when complete.
    live: Rc<Live>,
    interrupter: Interrupter,
    interrupts: Interrupts,
    /// The session's name, if it has one (the prompt shows it).
    name: Option<String>,
    /// The access mode's state (`/access`, Shift-Tab).
    mode: access::Mode,
}

/// What to do after an entry.
enum Next {
    Continue,
    Exit,
}

/// Run the interactive prompt. Returns the exit code.
pub async fn run(args: RunArgs, start: Start, restore_files: Option<bool>) -> Result<u8, Exit> {
    let (history, entries) = match history::dir() {
        Some(dir) => match History::open(&dir) {
            Ok((h, e)) => (Some(h), e),
            Err(e) => {
                render::line(&format!(
                    "hel: warning: no prompt history ({e}); this session's entries are not kept"
                ));
                (None, Vec::new())
            }
        },
        None => (None, Vec::new()),
    };
    let editor = Editor::new(&entries).map_err(Failure::Editor)?;
    let (interrupter, interrupts) = hel_agent::interrupts();
    let spinner = Spinner::default();
    let live = Rc::new(Live::new());
    if let Some(intro) = args.intro(true) {
        live.introduce(intro);
    }
    let resumed = !matches!(start, Start::New);
    let mode = access::Mode::new(&args);
    render::tool::at_prompt();
    let run = Run::start(
        args.options(),
        start,
        host(
            &spinner,
            &live,
            &editor,
            &interrupter,
            &interrupts,
            &mode.asks,
        ),
    )?;
    let mut prompt = Prompt {
        run,
        options: args.options(),
        editor,
        history,
        spinner,
        live,
        interrupter: interrupter.clone(),
        interrupts,
        name: None,
        mode,
    };
    prompt.name = session_name(&prompt.run);
    let project = prompt.run.project();
    prompt.editor.complete_in(&project.root, &project.cwd);
    if let Some(force) = restore_files {
        running::restore_forked(&mut prompt.run, force)?;
    }
    render::replay::after_start(&prompt.run, resumed, args.quiet);
    running::forward_ctrl_c(interrupter);
    if let Some(text) = args.first.as_deref().filter(|t| !t.trim().is_empty()) {
        render::line(&format!(
            "{}{}",
            prompt.prompt_text(),
            hel_agent::text::escape_line(text)
        ));
        prompt.remember(text);
        if let Next::Exit = prompt.instruction(text).await {
            prompt.run.finish();
            return Ok(0);
        }
    }
    let mut typed = (String::new(), 0);
    loop {
        // Ctrl-C that cancels an instruction is a signal, not a key: only
        // presses at the prompt itself count towards leaving.
        let shown = prompt.prompt_text();
        let initial = std::mem::take(&mut typed);
        let text = match prompt.editor.read_entry(&shown, (&initial.0, initial.1)) {
            Read::Line(text) => text,
            Read::Cycle(line, pos) => {
                prompt.access(None, true);
                typed = (line, pos);
                continue;
            }
            Read::CtrlC | Read::Eof => break,
            Read::Failed(e) => {
                render::line(&format!("hel: cannot read the terminal: {e}"));
                prompt.run.finish();
                return Ok(1);
            }
        };
        if text.trim().is_empty() {
            continue;
        }
        prompt.remember(&text);
        let next = match slash::parse(&text) {
            Some(Ok(cmd)) => prompt.command(cmd).await,
            Some(Err(why)) => {
                render::line(&format!("hel: {why}"));
                Next::Continue
            }
            None => prompt.instruction(&text).await,
        };
        if let Next::Exit = next {
            break;
        }
    }
    prompt.run.finish();
    if let Some(hint) = resume_hint(&prompt.run) {
        note!("{hint}");
    }
    Ok(0)
}

/// `resume with: hel resume fix-login` (or the short id) when the session
/// has anything saved to come back to.
fn resume_hint(run: &Run) -> Option<String> {
    let status = run.status();
    let id = status.session.filter(|_| status.head.is_some())?;
    let short = id.as_str().chars().take(8).collect::<String>();
    Some(format!(
        "resume with: hel resume {}",
        session_name(run).unwrap_or(short)
    ))
}

/// The name of the run's session, if it has one (a names file that
/// cannot be read gives none: the id is shown instead). Made safe for a
/// terminal: the store may have come with the repository.
fn session_name(run: &Run) -> Option<String> {
    let id = run.status().session?;
    let store = hel_store::Store::open(&run.project().root).ok()?;
    let name = hel_store::names::name_of(&store, &id).ok().flatten()?;
    Some(hel_agent::text::escape_line(&name).into_owned())
}

/// What a run of the prompt talks to.
fn host(
    spinner: &Spinner,
    live: &Rc<Live>,
    editor: &Editor,
    interrupter: &Interrupter,
    interrupts: &Interrupts,
    asks: &Rc<Cell<bool>>,
) -> Host {
    Host {
        observer: Rc::new(Watched {
            spinner: spinner.clone(),
            live: Rc::clone(live),
            asks: Rc::clone(asks),
        }),
        confirm: Arc::new(Ask {
            editor: editor.clone(),
            interrupter: interrupter.clone(),
        }),
        interrupts: interrupts.clone(),
    }
}

/// `hel 4da5b0e0 · 12% › `: the session's name or short id, the access
/// mode when it is not `confirm` (`hel 4da5b0e0 · auto · 12% › `), and the
/// share of the context window the next request would fill.
fn prompt_text(status: &Status, name: Option<&str>, access: hel_agent::Access) -> String {
    let id = match (name, &status.session) {
        (Some(name), _) => name.to_owned(),
        (None, Some(s)) => s.to_string().chars().take(8).collect::<String>(),
        (None, None) => "unsaved".into(),
    };
    let mode = match access {
        hel_agent::Access::Confirm => String::new(),
        a => format!("{} · ", access::name(a)),
    };
    format!("hel {id} · {mode}{}% › ", percent(status))
}

fn percent(status: &Status) -> u64 {
    (status.context_tokens * 100 + status.window / 2) / status.window.max(1)
}

/// The line of token use after an answer; `~` marks the figures that are
/// hel's estimate (the server reported no usage, or the Meter rests on no
/// count of the server's).
fn usage_line(status: &Status) -> String {
    let usage = if status.usage.estimated { "~" } else { "" };
    let context = if status.context_estimated { "~" } else { "" };
    format!(
        "hel: {usage}{} tokens in, {usage}{} out · context {context}{} of {} ({}%)",
        tokens(status.usage.input_tokens),
        tokens(status.usage.output_tokens),
        tokens(status.context_tokens),
        tokens(status.window),
        percent(status)
    )
}

/// A token count for people: 950, 12.3k, 1.2M.
fn tokens(n: u64) -> String {
    match n {
        0..1_000 => n.to_string(),
        1_000..1_000_000 => format!("{:.1}k", n as f64 / 1e3),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

impl Prompt {
    fn prompt_text(&self) -> String {
        prompt_text(
            &self.run.status(),
            self.name.as_deref(),
            self.options.access,
        )
    }

    fn remember(&mut self, entry: &str) {
        self.editor.remember(entry);
        if let Some(h) = self.history.as_mut() {
            if let Err(e) = h.add(entry) {
                render::line(&format!(
                    "hel: warning: cannot save the prompt history ({e}); it is off for this session"
                ));
                self.history = None;
            }
        }
    }

    /// Run one instruction: the spinner until the first sign of an
    /// answer, the answer on stdout, then one line of token use (after an
    /// answer only: an incomplete instruction says why instead).
    async fn instruction(&mut self, text: &str) -> Next {
        let project = self.run.project();
        let (text, said) = attach::attach(text, &project.root, &project.cwd);
        for line in said {
            render::line(&line);
        }
        self.spinner.start();
        let outcome = self.run.instruction(&text).await;
        self.spinner.stop();
        self.outcome(outcome);
        Next::Continue
    }

    /// `/retry`: send the instruction that got no answer again.
    async fn retry(&mut self) {
        if self.run.unanswered().is_none() {
            render::line(
                "hel: nothing to retry: the last instruction was answered (or there was none)",
            );
            return;
        }
        self.spinner.start();
        let outcome = self.run.retry().await;
        self.spinner.stop();
        if let Some(outcome) = outcome {
            self.outcome(outcome);
        }
    }

    /// Show how an instruction ended: the answer on stdout, then one line
    /// of token use; an incomplete one says why, and what becomes of it.
    fn outcome(&self, outcome: Outcome) {
        match outcome {
            Outcome::Completed(answer) => {
                self.live.answer(&answer);
                render::line(&usage_line(&self.run.status()));
            }
            Outcome::Incomplete(why) => {
                render::line(&running::incomplete_line(&why));
                if self.run.unanswered().is_some() {
                    render::line("hel: it got no answer: your next message carries it, or /retry sends it again");
                }
            }
        }
    }

    async fn command(&mut self, cmd: Slash) -> Next {
        let status = self.run.status();
        // A new session exists from the model's first answer on.
        let session = status
            .session
            .as_ref()
            .filter(|_| status.head.is_some())
            .map(|s| s.to_string());
        match (cmd, session) {
            (Slash::Help, _) => render::help(slash::HELP, slash::HELP_COLUMN),
            (Slash::Exit, _) => return Next::Exit,
            (Slash::Retry, _) => self.retry().await,
            (Slash::Init, _) => {
                let exists =
                    std::fs::symlink_metadata(self.run.project().root.join(hel_agent::AGENTS_MD))
                        .is_ok();
                return self.instruction(&init::instruction(exists)).await;
            }
            (Slash::Access(mode), _) => self.access(mode.as_deref(), false),
            (Slash::Sessions, _) => report(&["sessions"]),
            // The last tool result whole, paged as /show is.
            (Slash::Last, _) => match render::tool::last() {
                Some(text) => crate::commands::page(&text),
                None => render::line("hel: no tool call has ended yet"),
            },
            (Slash::Resume(spec), _) => {
                let picked = match spec {
                    Some(s) => Ok(s),
                    None => crate::commands::session_to_resume(),
                };
                match picked {
                    Ok(s) => {
                        let before = self.run.status().session;
                        self.switch(Start::Resume(s), None);
                        let moved = self.run.status().session != before;
                        render::replay::after_resume(&self.run, moved);
                    }
                    Err(e) => render::failure_line("", &e),
                }
            }
            (
                Slash::Log
                | Slash::Show
                | Slash::Fork(_)
                | Slash::Rename(_)
                | Slash::Undo
                | Slash::Diff
                | Slash::Rewind
                | Slash::Tree,
                None,
            ) => render::line(
                "hel: nothing is saved yet: the session is made when the model first answers",
            ),
            (Slash::Log, Some(id)) => report(&["sessions", "log", &id]),
            (Slash::Diff, Some(id)) => report(&["diff", &id, "--last"]),
            (Slash::Undo, Some(id)) => self.undo(id),
            (Slash::Rewind, Some(id)) => self.rewind(id),
            (Slash::Tree, Some(id)) => self.tree(id),
            (Slash::Show, Some(id)) => report(&["sessions", "show", &id]),
            (Slash::Rename(name), Some(id)) => {
                report(&["sessions", "rename", &id, &name]);
                self.name = session_name(&self.run);
            }
            (Slash::Fork(at), Some(id)) => {
                let at = match (at, status.head) {
                    (Some(at), _) => at,
                    (None, Some(head)) => head.to_hex(),
                    (None, None) => {
                        render::line("hel: nothing to fork yet: this session has no checkpoint");
                        return Next::Continue;
                    }
                };
                self.fork(id, at);
            }
            (Slash::Compact, _) => {
                self.spinner.start();
                let done = self.run.compact_now().await;
                self.spinner.stop();
                match done {
                    Ok(true) => render::line(&format!(
                        "hel: compacted; context now {}% (saved with the next answer)",
                        percent(&self.run.status())
                    )),
                    Ok(false) => render::line(
                        "hel: nothing compacted (the newest part of the conversation is always kept as it is)"
                    ),
                    Err(why) => render::line(&format!("hel: compaction incomplete: {why}")),
                }
            }
            (Slash::Model(None), _) => {
                let listed = match hel_agent::resolve_provider(&self.options.provider) {
                    Ok(endpoint) => models::list(&endpoint).await,
                    Err(e) => Err(e.to_string()),
                };
                match listed {
                    Ok(ids) => {
                        for l in models::lines(&ids, &status.model, render::width()) {
                            render::line(&l);
                        }
                    }
                    Err(why) => render::line(&models::failed(&why)),
                }
            }
            (Slash::Model(Some(model)), _) => {
                self.run.set_model(&model);
                self.options.provider.model = Some(model.clone());
                render::line(&format!("hel: model {model} from the next request on"));
            }
        }
        Next::Continue
    }

    /// `/access [MODE]`, or Shift-Tab (`cycle`): the run takes the mode
    /// from its next call on, or starts again on its session when it
    /// must offer the writing tools.
    fn access(&mut self, mode: Option<&str>, cycle: bool) {
        match self.mode.command(mode, cycle, &mut self.options) {
            Some(access::Change::Set(a, network)) => self.run.set_access(a, network),
            Some(access::Change::Restart) => self.restart(),
            None => {}
        }
    }

    /// Start the run again on its session (a new one when nothing is
    /// saved yet), with the prompt's options; the session's lease goes
    /// with the old run, so a stand-in that makes nothing holds the prompt
    /// meanwhile.
    fn restart(&mut self) {
        let status = self.run.status();
        let Some(id) = status.session.filter(|_| status.head.is_some()) else {
            return self.switch(Start::New, None);
        };
        let quiet = Host {
            observer: Rc::new(Quiet),
            confirm: Arc::new(crate::tty::Tty::default()),
            interrupts: self.interrupts.clone(),
        };
        match Run::start(self.options.clone(), Start::New, quiet) {
            Ok(stand_in) => std::mem::replace(&mut self.run, stand_in).finish(),
            Err(e) => return render::failure_line("cannot start again: ", &e.into()),
        }
        self.switch(Start::Resume(id.to_string()), None);
    }

    /// Go on in a new session forked from checkpoint `at` of `session`;
    /// on failure the prompt stays on this one.
    fn fork(&mut self, session: String, at: String) {
        self.switch(Start::Fork { session, at }, None);
    }

    /// Go on in the session `start` names (with `restore` Some(force):
    /// a fork whose files are restored first, as `hel resume --at
    /// --restore-files` does); on failure the prompt stays where it is.
    fn switch(&mut self, start: Start, restore: Option<bool>) {
        let host = host(
            &self.spinner,
            &self.live,
            &self.editor,
            &self.interrupter,
            &self.interrupts,
            &self.mode.asks,
        );
        match Run::start(self.options.clone(), start, host) {
            Ok(run) => {
                let mut old = std::mem::replace(&mut self.run, run);
                old.finish();
                self.mode.started(&self.options);
                self.name = session_name(&self.run);
                if let Some(force) = restore {
                    if let Err(e) = running::restore_forked(&mut self.run, force) {
                        render::failure_line("", &e);
                    }
                }
            }
            Err(e) => render::failure_line("cannot go on there: ", &e.into()),
        }
    }

    /// `/undo`: `hel undo` of this session, which needs its lease: the
    /// run lets it go (a silent stand-in holds the prompt meanwhile: it
    /// makes nothing until a model answers), then the session is resumed,
    /// whatever the undo did.
    fn undo(&mut self, id: String) {
        // Nothing to undo: said, and the session goes on as it is (not
        // let go and resumed, which would print its banner again).
        if let Err(e) = undo_target(&self.run, &id) {
            render::failure_line("", &e);
            return;
        }
        let quiet = Host {
            observer: Rc::new(Quiet),
            confirm: Arc::new(crate::tty::Tty::default()),
            interrupts: self.interrupts.clone(),
        };
        let stand_in = match Run::start(self.options.clone(), Start::New, quiet) {
            Ok(r) => r,
            Err(e) => {
                render::failure_line("cannot undo here: ", &e.into());
                return;
            }
        };
        let mut old = std::mem::replace(&mut self.run, stand_in);
        old.finish();
        drop(old);
        let workspace = self.options.workspace.unwrap_or_default();
        if let Err(e) = crate::commands::undo(Some(id.clone()), false, false, false, workspace) {
            render::failure_line("", &e);
        }
        self.switch(Start::Resume(id), None);
    }

    /// `/rewind`: pick one of this session's answers, then go on from it
    /// in a fork (the later checkpoints stay in this session), its files
    /// restored if the user says so, with `hel restore`'s safety (a file
    /// changed since the session recorded it is left as it is).
    fn rewind(&mut self, id: String) {
        let picked = match pick_checkpoint(&self.run, &id) {
            Ok(Some(at)) => at,
            Ok(None) => {
                render::line("hel: nothing picked; the session goes on where it was");
                return;
            }
            Err(e) => {
                render::failure_line("", &e);
                return;
            }
        };
        self.continue_from(id, picked);
    }

    /// `/tree`: the session's family of forks as a tree; the user picks
    /// an answer of any of them and goes on from it as `/rewind` does.
    fn tree(&mut self, id: String) {
        let ask = |question: &str| match self.editor.read(question) {
            Read::Line(l) => Some(l),
            _ => None,
        };
        match crate::commands::pick_in_tree(&self.run.project().root, &id, ask) {
            Ok(Some(picked)) if picked.deleted => {
                render::line("hel: that answer's session was deleted: the conversation goes on from it in a fork, and the files stay as they are (`hel resume SESSION --at ID --restore-files` puts them back)");
                self.switch(
                    Start::Fork {
                        session: picked.session,
                        at: picked.at,
                    },
                    None,
                );
            }
            Ok(Some(picked)) => self.continue_from(picked.session, picked.at),
            Ok(None) => render::line("hel: nothing picked; the session goes on where it was"),
            Err(e) => render::failure_line("", &e),
        }
    }

    /// Go on from checkpoint `at` of `session` in a fork, its files
    /// restored if the user says so (as `hel resume --at --restore-files`).
    fn continue_from(&mut self, session: String, at: String) {
        let question = "hel: also make the project's files as they were there? [y/N] ";
        let restore = matches!(
            self.editor.read(question),
            Read::Line(l) if matches!(l.trim(), "y" | "Y" | "yes")
        );
        self.switch(Start::Fork { session, at }, restore.then_some(false));
    }
}

/// Hears nothing: the stand-in run of `/undo`.
struct Quiet;

impl Observer for Quiet {
    fn event(&self, _: Event) {}
}

/// Pick one of `session`'s answers on the terminal, newest first (None:
/// the user picked none).
/// What `/undo` would put back, read without the session's lease: an
/// error only when there is nothing to undo (anything else is left to the
/// undo itself, which says it).
fn undo_target(run: &Run, session: &str) -> Result<(), Exit> {
    use hel_workspace::history::{self, HistoryError};
    let look = || -> Result<Option<HistoryError>, Exit> {
        let store = hel_store::Store::open(&run.project().root)?;
        let id = hel_agent::resolve_session(&store, &run.project().root, session)?;
        let head = store.head(&id)?;
        Ok(history::undo_target(&store, &head).err())
    };
    match look() {
        Ok(Some(e @ HistoryError::NothingToUndo(_))) => {
            Err(hel_workspace::undo::UndoError::from(e).into())
        }
        _ => Ok(()),
    }
}

fn pick_checkpoint(run: &Run, session: &str) -> Result<Option<String>, Exit> {
    let store = hel_store::Store::open(&run.project().root)?;
    let id = hel_agent::resolve_session(&store, &run.project().root, session)?;
    let answers: Vec<_> = hel_store::log::log(&store, &id)?
        .into_iter()
        .filter(|e| e.record == hel_store::Record::Answer)
        .collect();
    if answers.is_empty() {
        return Err(Refusal::NoAnswerYet.into());
    }
    let width = crate::render::width().saturating_sub(4);
    let rows: Vec<String> = answers
        .iter()
        .map(|e| {
            let text = format!(
                "{}  {}  {}",
                &e.id.to_hex()[..12],
                &e.time,
                hel_agent::text::escape_line(&e.instruction)
            );
            crate::render::fit(&text, width)
        })
        .collect();
    let picked = dialoguer::FuzzySelect::new()
        .with_prompt("go back to which answer? (type to filter, Enter to pick, Esc to cancel)")
        .items(&rows)
        .default(0)
        .max_length(10)
        .interact_opt()
        .map_err(Failure::Picker)?;
    Ok(picked.map(|i| answers[i].id.to_hex()))
}

/// Print what `hel ARGS…` prints (a store report), its failure as a line.
fn report(args: &[&str]) {
    let argv = std::iter::once("hel").chain(args.iter().copied());
    let result = match Cli::try_parse_from(argv) {
        Ok(Cli {
            command:
                Some(Command::Sessions {
                    command,
                    json,
                    remote,
                }),
            ..
        }) => crate::commands::sessions(command, json, remote),
        Ok(Cli {
            command: Some(Command::Diff(args)),
            ..
        }) => crate::commands::diff(args),
        Ok(_) => Err(Usage::NotAReport.into()),
        Err(e) => Err(Usage::ReportArgs(e).into()),
    };
    if let Err(e) = result {
        render::failure_line("", &e);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prompt_shows_the_short_id_and_the_context_fill() {
        let mut status = Status {
            session: "4da5b0e0-1111-4222-8333-444455556666".parse().ok(),
            head: None,
            context_tokens: 15_360,
            context_estimated: false,
            window: 128_000,
            usage: hel_agent::Usage {
                input_tokens: 15_000,
                output_tokens: 300,
                estimated: false,
            },
            model: "m".into(),
        };
        let confirm = hel_agent::Access::Confirm;
        assert_eq!(prompt_text(&status, None, confirm), "hel 4da5b0e0 · 12% › ");
        assert_eq!(
            prompt_text(&status, Some("fix-login"), hel_agent::Access::Auto),
            "hel fix-login · auto · 12% › "
        );
        assert_eq!(
            usage_line(&status),
            "hel: 15.0k tokens in, 300 out · context 15.4k of 128.0k (12%)"
        );
        // A server that reported no usage: every figure is an estimate.
        status.usage.estimated = true;
        status.context_estimated = true;
        assert_eq!(
            usage_line(&status),
            "hel: ~15.0k tokens in, ~300 out · context ~15.4k of 128.0k (12%)"
        );
        status.session = None;
        status.context_tokens = 0;
        assert_eq!(prompt_text(&status, None, confirm), "hel unsaved · 0% › ");
        assert_eq!(tokens(950), "950");
        assert_eq!(tokens(12_345), "12.3k");
        assert_eq!(tokens(1_000_000), "1.0M");
    }
}
