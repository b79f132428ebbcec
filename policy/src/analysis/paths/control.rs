//! Agent and IDE control files (DESIGN.md §2 red: "code that would run outside the sandbox
//! later, or approvals the agent would grant itself"): files an editor, an agent or a
//! developer tool reads from the worktree and then runs commands from, launches servers
//! from, or takes permissions from, on the person's machine and outside tyba's sandbox. A
//! write, removal, rename or link of one, by any spelling (the edit tool, `>`, `tee`, `cp`,
//! `mv`, `ln`, `sed -i`…), is red (`path.control-file`).
//!
//! Each entry says which program runs what from it. Files that only hold prompts, style or
//! formatting settings (`AGENTS.md`, `.editorconfig`, `.prettierrc`) run nothing and are not
//! listed; build files (`Makefile`, `package.json`) run only when the person builds, like
//! any source, and are not listed either.

/// Directories whose files approve or run code later: a path with a component of this name
/// is a control file.
const DIRS: &[&str] = &[
    // Claude Code: `settings.json` (allowed tools, hooks run on every tool call), `hooks/`,
    // `commands/`, `agents/`.
    ".claude",
    // Codex: `config.toml` (approval policy, sandbox mode, MCP servers), `rules/`, hooks.
    ".codex",
    // Gemini CLI: `settings.json` (MCP servers' commands, tool approvals), `commands/`.
    ".gemini",
    // Cursor: `mcp.json` (MCP servers' commands), `hooks.json`, rules with auto-run.
    ".cursor",
    // VS Code: `tasks.json` (tasks run on folder open), `launch.json`, `settings.json`
    // (terminal profiles, formatter and linter paths), `mcp.json`.
    ".vscode",
    // Dev Containers: `devcontainer.json`'s `initializeCommand` runs on the host before the
    // container is built; `postCreateCommand`… and the Dockerfile beside it run too.
    ".devcontainer",
    // JetBrains IDEs: `workspace.xml` and `runConfigurations/` (run configurations, before-
    // launch tasks, startup tasks), `watcherTasks.xml` (File Watchers run programs on save).
    ".idea",
    // Zed: `tasks.json` (tasks), `settings.json` (language-server binaries, external
    // formatter commands).
    ".zed",
    // Continue: `config.yaml`/`config.json` and `mcpServers/` start MCP servers' commands.
    ".continue",
    // Windsurf: `hooks.json` (Cascade hooks: shell commands run around every action),
    // `mcp_config.json`.
    ".windsurf",
    // Cline: `.clinerules/hooks/` holds scripts Cline runs on its events (`PreToolUse`…).
    ".clinerules",
    // Roo Code: `mcp.json` starts MCP servers' commands.
    ".roo",
    // Kiro: `hooks/` (agent hooks that run shell commands), `settings/mcp.json`.
    ".kiro",
    // OpenCode: `plugin/` (JavaScript plugins loaded at start), `opencode.json`.
    ".opencode",
    // mise: `.mise/config.toml` (see `MISE` below) and `.mise/tasks/`.
    ".mise",
];

/// Single files outside those directories.
const FILES: &[&str] = &[
    // MCP servers' commands, started by Claude Code and other agents at start.
    ".mcp.json",
    // Claude Code: MCP servers, per-project allowed tools and trust.
    ".claude.json",
    // Dev Containers: the same file at the root (`initializeCommand` runs on the host).
    ".devcontainer.json",
    // aider: `lint-cmd`, `test-cmd` with `auto-lint`/`auto-test` run after every edit.
    ".aider.conf.yml",
    // OpenCode: `mcp` local servers' commands, `plugin` list.
    "opencode.json",
    "opencode.jsonc",
    // asdf and mise: a `path:DIR` version makes the person's shims run programs from DIR;
    // other versions select which plugin scripts install and run tools.
    ".tool-versions",
];

/// mise (`mise activate` in the person's shell): `[hooks]` run commands on entering the
/// directory, `[env] _.source` sources scripts, `[tasks]` run commands. Its project files are
/// `mise.toml`, `mise.local.toml`, `mise.<ENV>.toml` and their dotted forms, and
/// `config.toml` (or `conf.d/*.toml`) under a `mise`/`.mise` directory (`.config/mise/`).
fn mise_file(comps: &[&str], i: usize) -> bool {
    let name = comps[i];
    let bare = name.strip_prefix('.').unwrap_or(name);
    // `STEM.toml` or `STEM.<anything>.toml`.
    let toml_of = |stem: &str, n: &str| {
        n.strip_prefix(stem)
            .and_then(|r| r.strip_prefix('.'))
            .is_some_and(|r| r == "toml" || r.ends_with(".toml"))
    };
    if toml_of("mise", bare) {
        return true;
    }
    let is_mise = |c: Option<&&str>| c.is_some_and(|c| *c == "mise" || *c == ".mise");
    let parent = i.checked_sub(1).and_then(|j| comps.get(j));
    let grandparent = i.checked_sub(2).and_then(|j| comps.get(j));
    (is_mise(parent) && toml_of("config", name))
        || (parent.is_some_and(|p| *p == "conf.d")
            && is_mise(grandparent)
            && name.ends_with(".toml"))
}

/// Whether component `i` of a path (relative to the worktree, or absolute) names an agent
/// or IDE control file or directory; returns the name to report.
pub(crate) fn control_component<'a>(comps: &[&'a str], i: usize) -> Option<&'a str> {
    let c = *comps.get(i)?;
    (DIRS.contains(&c) || FILES.contains(&c) || mise_file(comps, i)).then_some(c)
}

#[cfg(test)]
mod tests {
    use super::control_component;

    fn any(path: &str) -> bool {
        let comps: Vec<&str> = path.split('/').collect();
        (0..comps.len()).any(|i| control_component(&comps, i).is_some())
    }

    #[test]
    fn control_files_of_each_tool() {
        for p in [
            ".vscode/tasks.json",
            ".devcontainer/devcontainer.json",
            ".devcontainer/Dockerfile",
            ".devcontainer.json",
            ".idea/workspace.xml",
            ".idea/runConfigurations/x.xml",
            ".zed/tasks.json",
            ".zed/settings.json",
            "mise.toml",
            ".mise.toml",
            "mise.local.toml",
            ".mise.dev.toml",
            ".config/mise/config.toml",
            ".config/mise/conf.d/x.toml",
            ".mise/config.toml",
            ".config/mise/config.local.toml",
            ".tool-versions",
            ".aider.conf.yml",
            ".continue/config.yaml",
            ".continue/mcpServers/x.yaml",
            ".windsurf/hooks.json",
            ".clinerules/hooks/PreToolUse",
            ".kiro/hooks/x.kiro.hook",
            ".roo/mcp.json",
            "opencode.json",
            "sub/project/.idea/workspace.xml",
        ] {
            assert!(any(p), "{p} is a control file");
        }
    }

    #[test]
    fn files_that_run_nothing_are_not() {
        for p in [
            "src/mise.rs",
            "docs/mise/notes.md",
            "mise.txt",
            "README.md",
            ".editorconfig",
            "AGENTS.md",
            "idea/workspace.xml",
            "zed/tasks.json",
            "tool-versions",
            "src/mise/lib.toml.md",
            "src/mise/Cargo.toml",
        ] {
            assert!(!any(p), "{p} runs nothing");
        }
    }
}
