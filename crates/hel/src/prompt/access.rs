//! `/access` and Shift-Tab: the access mode changed at the prompt, by the
//! user at their terminal (never by anything a project holds). The run
//! changes it from its next tool call on; a run that started read-only
//! offers no writing tool, so leaving read-only starts the run again on
//! the same session.

use std::rc::Rc;
use std::sync::Arc;

use hel_agent::{Access, Host, Run, Start};

use super::{Prompt, Quiet};
use crate::render;

/// The modes, in Shift-Tab's order, with what each does.
const MODES: &[(Access, &str, &str)] = &[
    (
        Access::Confirm,
        "confirm",
        "writes and commands are asked about first",
    ),
    (
        Access::Auto,
        "auto",
        "writes and commands run without asking",
    ),
    (Access::ReadOnly, "read-only", "only the reading tools run"),
];

/// The mode's name, as `--access` spells it.
pub fn name(access: Access) -> &'static str {
    MODES
        .iter()
        .find(|(a, _, _)| *a == access)
        .map_or("confirm", |(_, n, _)| n)
}

fn what(access: Access) -> &'static str {
    MODES
        .iter()
        .find(|(a, _, _)| *a == access)
        .map_or("", |(_, _, w)| w)
}

/// The mode after `access` in Shift-Tab's order.
pub fn next(access: Access) -> Access {
    let i = MODES.iter().position(|(a, _, _)| *a == access).unwrap_or(0);
    MODES[(i + 1) % MODES.len()].0
}

/// `/access` with no mode: the mode and the choices, the current one
/// marked.
pub fn list(current: Access) -> Vec<String> {
    let mut out = vec![format!(
        "hel: access {}; /access MODE or Shift-Tab changes it:",
        name(current)
    )];
    for (a, n, w) in MODES {
        let mark = if *a == current { '*' } else { ' ' };
        out.push(format!("{mark} {n:<10} {w}"));
    }
    out
}

impl Prompt {
    /// `/access [MODE]`.
    pub(super) fn access(&mut self, mode: Option<String>) {
        let Some(mode) = mode else {
            for l in list(self.options.access) {
                render::line(&l);
            }
            return;
        };
        match MODES.iter().find(|(_, n, _)| *n == mode) {
            Some((a, _, _)) => self.set_access(*a),
            None => render::line(&format!(
                "hel: no access mode {}: read-only, confirm or auto",
                hel_agent::text::escape_line(&mode)
            )),
        }
    }

    /// Shift-Tab: the next mode.
    pub(super) fn cycle_access(&mut self) {
        self.set_access(next(self.options.access));
    }

    fn set_access(&mut self, access: Access) {
        // Read-only runs no command: the network stays as it was.
        let network = match access {
            Access::ReadOnly => self.options.network,
            a => self.network.unwrap_or_else(|| a.network_by_default()),
        };
        let from_read_only = self.options.access == Access::ReadOnly && access != Access::ReadOnly;
        let network_changed = network != self.options.network;
        self.options.access = access;
        self.options.network = network;
        self.asks.set(access == Access::Confirm);
        render::line(&format!("hel: access {}: {}", name(access), what(access)));
        if network_changed && self.options.sandbox {
            render::line(if network {
                "hel: sandboxed commands may use the network now (--no-network keeps them off it)"
            } else {
                "hel: sandboxed commands get no network now (--network gives it)"
            });
        }
        if from_read_only && self.started_read_only {
            self.restart();
        } else {
            self.run.set_access(access, network);
        }
    }

    /// Start the run again, on this session if it has anything saved,
    /// with the prompt's options (the writing tools offered now).
    fn restart(&mut self) {
        let status = self.run.status();
        let Some(id) = status.session.filter(|_| status.head.is_some()) else {
            self.switch(Start::New, None);
            return;
        };
        // The session's lease goes with the old run: a stand-in that makes
        // nothing holds the prompt meanwhile.
        let quiet = Host {
            observer: Rc::new(Quiet),
            confirm: Arc::new(crate::tty::Tty::default()),
            interrupts: self.interrupts.clone(),
        };
        match Run::start(self.options.clone(), Start::New, quiet) {
            Ok(stand_in) => {
                let mut old = std::mem::replace(&mut self.run, stand_in);
                old.finish();
            }
            Err(e) => {
                render::failure_line("cannot start again: ", &e.into());
                return;
            }
        }
        self.switch(Start::Resume(id.to_string()), None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_cycle_and_list() {
        assert_eq!(next(Access::Confirm), Access::Auto);
        assert_eq!(next(Access::Auto), Access::ReadOnly);
        assert_eq!(next(Access::ReadOnly), Access::Confirm);
        let l = list(Access::Auto);
        assert_eq!(l[2], "* auto       writes and commands run without asking");
        assert!(l[1].starts_with("  confirm "));
    }
}
