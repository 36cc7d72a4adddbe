//! `/access` and Shift-Tab: the access mode changed at the prompt, by the
//! user at their terminal (never by anything a project holds). The run
//! changes it from its next tool call on; a run that started read-only
//! offers no writing tool, so leaving read-only starts the run again on
//! the same session.

use std::cell::Cell;
use std::rc::Rc;

use hel_agent::{Access, Options};

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

/// What the prompt keeps of the mode besides its options.
pub struct Mode {
    /// Writes and commands are asked about (what the spinner knows).
    pub asks: Rc<Cell<bool>>,
    /// `--network` or `--no-network` (None: by the access mode).
    network: Option<bool>,
    /// The run started read-only: it offers no writing tool.
    started_read_only: bool,
}

/// What the run must do for a change of mode.
pub enum Change {
    /// Take this mode and network setting from its next call on.
    Set(Access, bool),
    /// Start again (it offers no writing tool).
    Restart,
}

impl Mode {
    pub fn new(args: &crate::cli::RunArgs) -> Mode {
        Mode {
            asks: Rc::new(Cell::new(args.access == crate::cli::Access::Confirm)),
            network: match (args.network, args.no_network) {
                (true, _) => Some(true),
                (_, true) => Some(false),
                _ => None,
            },
            started_read_only: args.access == crate::cli::Access::ReadOnly,
        }
    }

    /// A run was started with `options`.
    pub fn started(&mut self, options: &Options) {
        self.started_read_only = options.access == Access::ReadOnly;
    }

    /// `/access [MODE]` (None: show the mode and the choices); Shift-Tab
    /// is `cycle`. Says what changed; None when nothing did.
    pub fn command(
        &mut self,
        mode: Option<&str>,
        cycle: bool,
        options: &mut Options,
    ) -> Option<Change> {
        let access = if cycle {
            next(options.access)
        } else {
            let Some(mode) = mode else {
                for l in list(options.access) {
                    render::line(&l);
                }
                return None;
            };
            match MODES.iter().find(|(_, n, _)| *n == mode) {
                Some((a, _, _)) => *a,
                None => {
                    render::line(&format!(
                        "hel: no access mode {}: read-only, confirm or auto",
                        hel_agent::text::escape_line(mode)
                    ));
                    return None;
                }
            }
        };
        Some(self.set(access, options))
    }

    fn set(&mut self, access: Access, options: &mut Options) -> Change {
        // Read-only runs no command: the network stays as it was.
        let network = match access {
            Access::ReadOnly => options.network,
            a => self.network.unwrap_or_else(|| a.network_by_default()),
        };
        let from_read_only = options.access == Access::ReadOnly && access != Access::ReadOnly;
        let network_changed = network != options.network;
        options.access = access;
        options.network = network;
        self.asks.set(access == Access::Confirm);
        render::line(&format!("hel: access {}: {}", name(access), what(access)));
        if network_changed && options.sandbox {
            render::line(if network {
                "hel: sandboxed commands may use the network now (--no-network keeps them off it)"
            } else {
                "hel: sandboxed commands get no network now (--network gives it)"
            });
        }
        if from_read_only && self.started_read_only {
            Change::Restart
        } else {
            Change::Set(access, network)
        }
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
