//! `/init`: the model is asked, as a normal instruction, to look at the
//! project and write `AGENTS.md` at its root (or to improve the one
//! there). Its write goes through the access mode like any other: asked
//! about first under `confirm`.

/// The instruction `/init` sends; `exists`: the project already has an
/// `AGENTS.md`.
pub fn instruction(exists: bool) -> String {
    let task = if exists {
        "AGENTS.md already exists at the project's root: read it, then improve it: \
         correct what is wrong or out of date, add what is missing, keep what is right"
    } else {
        "Then write AGENTS.md at the project's root"
    };
    format!(
        "Look at this project and write down what a coding agent needs to work on it. \
         First read the tree (the top-level directories and what is in them), the build \
         files (Cargo.toml, package.json, pyproject.toml, go.mod, Makefile and the like), \
         the README and any CI configuration. {task}. Keep it short and true, with no \
         placeholders (leave out what you could not find out): the exact commands to \
         build, test and lint; the layout (the main directories and what is in them); \
         the conventions (code style, what to run before a change is done, what not to \
         touch). AGENTS.md is read by hel, Codex, OpenCode and other agents."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_instruction_asks_for_agents_md() {
        let new = instruction(false);
        assert!(
            new.contains("write AGENTS.md at the project's root"),
            "{new}"
        );
        assert!(new.contains("build, test and lint"));
        let again = instruction(true);
        assert!(again.contains("improve it"), "{again}");
    }
}
