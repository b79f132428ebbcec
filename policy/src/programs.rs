//! Program facts the policy decides by, for the crates that must agree with it (the
//! supervisor reads an intercepted exec's program with these, so a shell is the same shell
//! to both).

/// Names of the shells whose `-c STRING` the policy analyses as a command line (DESIGN.md
/// §2a "Shells and interpreters").
pub const SHELLS: &[&str] = crate::analysis::SHELLS;

/// The system program directories: a program path directly in one of them (after folding
/// `/proc/self/root` and `..`) is the program of that name; a bare name resolves there on a
/// standard `PATH`.
pub const SYSTEM_BIN_DIRS: &[&str] = crate::analysis::SYSTEM_BIN_DIRS;

/// Whether `name` (a bare program name) is one of [`SHELLS`].
pub fn is_shell(name: &str) -> bool {
    SHELLS.contains(&name)
}
