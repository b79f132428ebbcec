//! Errors of the git guard, one enum per operation.

use std::path::PathBuf;

/// The repository could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RepoError {
    /// No repository at or above this directory, or it could not be opened.
    #[error("cannot open a git repository at {path}: {message}")]
    Open {
        /// Where the search started.
        path: PathBuf,
        /// What gix reported.
        message: String,
    },
    /// Discovery failed.
    #[error("cannot find a git repository at or above {path}: {message}")]
    Discover {
        /// Where the search started.
        path: PathBuf,
        /// What gix reported.
        message: String,
    },
    /// A file git reads in the repository is not a regular file (a FIFO or a device would
    /// block the reader or never end).
    #[error("refusing to read {path}: not a regular file")]
    NotRegular {
        /// The file.
        path: PathBuf,
    },
    /// References could not be listed.
    #[error("cannot list the references of {path}: {message}")]
    Refs {
        /// The git directory.
        path: PathBuf,
        /// What gix reported.
        message: String,
    },
}

/// A line of pre-push hook input that does not have git's shape
/// (`<local ref> SP <local oid> SP <remote ref> SP <remote oid> LF`, githooks(5)).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HookInputError {
    /// Fewer than four space-separated fields.
    #[error("line {line}: expected `<local ref> <local oid> <remote ref> <remote oid>`")]
    Fields {
        /// 1-based line number.
        line: usize,
    },
    /// An object id that is not 40 (SHA-1) or 64 (SHA-256) lower-case hex digits, or two ids of
    /// different lengths.
    #[error("line {line}: bad object id `{oid}`")]
    ObjectId {
        /// 1-based line number.
        line: usize,
        /// The offending field.
        oid: String,
    },
    /// An empty or malformed remote ref name.
    #[error("line {line}: bad remote ref `{name}`")]
    RemoteRef {
        /// 1-based line number.
        line: usize,
        /// The offending field.
        name: String,
    },
    /// The input is not UTF-8 or could not be read.
    #[error("unreadable hook input: {0}")]
    Read(String),
}

/// Installing or removing the pre-push hook failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InstallError {
    /// The repository could not be read.
    #[error(transparent)]
    Repo(#[from] RepoError),
    /// A file operation on the hooks directory failed.
    #[error("{action} {path}")]
    Io {
        /// What was being done (`writing`, `renaming`, …).
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}
