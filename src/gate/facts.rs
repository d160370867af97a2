//! Workspace facts: what the gate would need to know about the files on the agent's machine to
//! allow a call it cannot prove safe from the text alone, and the set of such facts a checker
//! found true.
//!
//! The gate never looks at the filesystem. Where a call's safety turns on a fact about it (git
//! runs hooks only if the repository has some; `du -sh *` is safe only if no name in the
//! directory begins with `-`; `diff a b` prints a directory's `.env` if either is a directory;
//! `grep -r` reads whatever lies under its operands), the gate refuses the call and records the
//! fact as a [`Fact`] in the outcome's `needs`. A caller that runs beside the agent (the hook)
//! may check those facts ([`crate::facts`]) and ask again with the ones that hold; the gate then
//! drops exactly the refusals those facts answer, and judges the files a tree fact lists by the
//! path rules like any other read. Data only: nothing here decides, reads a file or fails. An
//! unchecked or false fact changes nothing, so the answer without facts is the strictest one.

use std::collections::HashMap;

use serde::Serialize;

/// One fact about the agent's machine, named by absolute, normalised paths as the gate
/// resolved them (after `cd`, `~` and `..`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(tag = "fact", rename_all = "snake_case")]
pub enum Fact {
    /// git run in `dir` runs no hook: its hooks directory (`core.hooksPath` honoured) holds
    /// nothing but git's `*.sample` files, and no `hook.*` setting names a command.
    NoRepositoryHooks { dir: String },
    /// No entry of `dir` has a name beginning with `-`, so a glob there expands to no option.
    NoDashNames { dir: String },
    /// `path` is a regular file, and no component of it is a symbolic link.
    RegularFile { path: String },
    /// `dir` is a directory, no component of it is a symbolic link, and everything under it is
    /// a directory or a regular file (no link, device, pipe or socket), few enough to list.
    PlainTree { dir: String },
}

impl Fact {
    /// The sentence a refusal that this fact would answer ends with.
    pub fn describe(&self) -> String {
        match self {
            Fact::NoRepositoryHooks { dir } => format!("the repository at `{dir}` has no hooks"),
            Fact::NoDashNames { dir } => format!("no name in `{dir}` begins with `-`"),
            Fact::RegularFile { path } => format!("`{path}` is a regular file"),
            Fact::PlainTree { dir } => {
                format!("`{dir}` holds only directories and regular files, each of which the path rules allow")
            }
        }
    }
}

/// The facts a checker found true, and for each tree the files it holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Facts {
    held: HashMap<Fact, Vec<String>>,
}

impl Facts {
    /// Records a fact the checker found true; `files` is a tree's regular files (absolute
    /// paths), empty for the other facts.
    pub fn hold(&mut self, fact: Fact, files: Vec<String>) {
        self.held.insert(fact, files);
    }

    pub fn holds(&self, fact: &Fact) -> bool {
        self.held.contains_key(fact)
    }

    /// The files under a tree that holds, to be judged as reads; `None` when it does not hold.
    pub fn tree_files(&self, dir: &str) -> Option<&[String]> {
        self.held.get(&Fact::PlainTree { dir: dir.to_owned() }).map(Vec::as_slice)
    }

    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    pub fn len(&self) -> usize {
        self.held.len()
    }
}
