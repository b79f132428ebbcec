//! Static word expansion: brace expansion, tilde, parameters known on the line, quote removal,
//! word splitting of known unquoted values. Whatever cannot be known becomes an
//! [`Part::Unknown`] part, never an empty string.

use brush_parser::word::{
    BraceExpressionMember, BraceExpressionOrText, Parameter, ParameterExpr, SpecialParameter,
    TildeExpr, WordPiece, WordPieceWithSource,
};
use brush_parser::ParserOptions;
use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

mod ansi_c;
mod params;

pub(crate) use ansi_c::decode_ansi_c;
use params::*;

/// Expanded text beyond this many bytes is unknown (bounds work on self-doubling variables).
const MAX_VALUE_BYTES: usize = 16 * 1024;

/// Brace expansion results beyond this many words make the word unknown (stricter, never empty).
const MAX_BRACE_WORDS: usize = 256;

/// One piece of an expanded field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Part {
    /// Known text. `glob` is set for unquoted text whose `*`, `?`, `[` are pattern characters.
    Lit { text: String, glob: bool },
    /// A value that cannot be known statically (unknown variable, command substitution…).
    Unknown,
}

/// One field (argument) after expansion.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Field {
    pub parts: Vec<Part>,
    /// A quoted empty string (`""`, `"$empty"`) is part of the word: the field exists even
    /// when it holds no text.
    pub forced: bool,
}

impl Field {
    pub fn lit(s: &str) -> Self {
        Field {
            parts: vec![Part::Lit {
                text: s.to_string(),
                glob: false,
            }],
            forced: false,
        }
    }

    fn push_lit(&mut self, s: &str, glob: bool) {
        if s.is_empty() {
            return;
        }
        if let Some(Part::Lit { text, glob: g }) = self.parts.last_mut() {
            if *g == glob {
                text.push_str(s);
                return;
            }
        }
        self.parts.push(Part::Lit {
            text: s.to_string(),
            glob,
        });
    }

    fn push_unknown(&mut self) {
        if self.parts.last() != Some(&Part::Unknown) {
            self.parts.push(Part::Unknown);
        }
    }

    /// A field whose whole value is unknown.
    pub fn unknown() -> Self {
        Field {
            parts: vec![Part::Unknown],
            forced: false,
        }
    }

    /// A field whose middle is unknown: `before` + any value + `after` (`{}` of `find -exec`
    /// under its start path, an `xargs -I` placeholder).
    pub fn around_unknown(before: &str, after: &str) -> Self {
        let mut f = Field::default();
        f.push_lit(before, false);
        f.parts.push(Part::Unknown);
        f.push_lit(after, false);
        f
    }

    /// Several fields as one value, separated by spaces (assignment values are not split;
    /// arrays are kept joined for `${a[@]}` to split again).
    pub fn joined(fields: impl IntoIterator<Item = Field>) -> Self {
        let mut out = Field::default();
        for (i, f) in fields.into_iter().enumerate() {
            if i > 0 {
                out.push_lit(" ", false);
            }
            out.forced |= f.forced;
            out.parts.extend(f.parts);
        }
        out
    }

    /// The text when every part is known.
    pub fn known(&self) -> Option<String> {
        self.known_text().map(Cow::into_owned)
    }

    /// [`Self::known`] without a copy when the field is one known part (most words).
    pub fn known_text(&self) -> Option<Cow<'_, str>> {
        match self.parts.as_slice() {
            [] => Some(Cow::Borrowed("")),
            [Part::Lit { text, .. }] => Some(Cow::Borrowed(text)),
            parts => {
                let mut s = String::new();
                for p in parts {
                    match p {
                        Part::Lit { text, .. } => s.push_str(text),
                        Part::Unknown => return None,
                    }
                }
                Some(Cow::Owned(s))
            }
        }
    }

    pub fn is_known(&self) -> bool {
        !self.parts.contains(&Part::Unknown)
    }

    /// Known text before the first unknown part.
    pub fn known_prefix(&self) -> String {
        let mut s = String::new();
        for p in &self.parts {
            match p {
                Part::Lit { text, .. } => s.push_str(text),
                Part::Unknown => break,
            }
        }
        s
    }

    /// The text with every unknown part taken as empty.
    pub fn empty_variant(&self) -> String {
        let mut s = String::new();
        for p in &self.parts {
            if let Part::Lit { text, .. } = p {
                s.push_str(text);
            }
        }
        s
    }

    /// Whether unquoted pattern characters appear (`*`, `?`, `[`, an extended pattern).
    pub fn has_glob(&self) -> bool {
        self.parts.iter().any(|p| match p {
            Part::Lit { text, glob: true } => super::paths::pattern::is_pattern(text),
            _ => false,
        })
    }

    /// A lossy display form (`$?` for unknown parts).
    pub fn display(&self) -> String {
        let mut s = String::new();
        for p in &self.parts {
            match p {
                Part::Lit { text, .. } => s.push_str(text),
                Part::Unknown => s.push_str("$?"),
            }
        }
        s
    }
}

/// Possible values of a variable: each entry one possibility, `None` = unknown.
pub(crate) type VarValues = Vec<Option<String>>;

/// What the expander needs from the walker.
pub(crate) struct ExpandEnv<'a> {
    pub vars: &'a HashMap<String, VarValues>,
    pub home: Option<&'a Path>,
    pub cwd: Option<&'a Path>,
    pub oldpwd: Option<&'a Path>,
    /// The positional parameters set on the line ([`super::State::params`]); `None`: the
    /// line's own.
    pub params: Option<&'a [Option<Vec<String>>]>,
}

/// Side effects found while expanding: command substitutions to analyse, dangerous forms.
#[derive(Debug, Default)]
pub(crate) struct ExpandNotes {
    /// Inner command lines of `$(…)` / backquotes / `$((…))` with substitutions.
    pub substitutions: Vec<String>,
    /// Arithmetic text evaluated by the expansion (array subscripts): it can run code.
    pub arith: Vec<String>,
    /// Variables the expansion assigns (`${V:=value}`).
    pub assigned: Vec<String>,
    /// Values expanded like a prompt (`${a@P}`), whose substitutions run.
    pub prompt_code: Vec<String>,
    /// A prompt expansion of a value that cannot be known: code built at run time.
    pub dynamic_code: bool,
    /// The word could not be parsed as a word.
    pub unparseable: bool,
    /// A `${x:=…}`-style assignment or `${!x}` indirection happened.
    pub dynamic: bool,
}

pub(crate) fn options() -> ParserOptions {
    ParserOptions::default()
}

/// Expands one raw word into fields (brace expansion may give several; splitting of known
/// unquoted values may give several; an unquoted unknown value gives one field with an unknown
/// part). A word that expands to nothing (e.g. `"$@"`) gives no field.
pub(crate) fn expand(raw: &str, env: &ExpandEnv<'_>, notes: &mut ExpandNotes) -> Vec<Field> {
    let mut out = Vec::new();
    expand_into(raw, env, notes, &mut out);
    out
}

/// [`expand`], appending the fields to `out`.
pub(crate) fn expand_into(
    raw: &str,
    env: &ExpandEnv<'_>,
    notes: &mut ExpandNotes,
    out: &mut Vec<Field>,
) {
    if is_plain(raw) {
        // The grammar gives such a word one unquoted text piece: one field of that text, its
        // pattern characters globs (the slow path's result, checked by a test).
        out.push(Field {
            parts: vec![Part::Lit {
                text: raw.to_string(),
                glob: true,
            }],
            forced: false,
        });
        return;
    }
    out.extend(expand_parsed(raw, env, notes));
}

/// [`expand`] through the word grammar, for every word.
fn expand_parsed(raw: &str, env: &ExpandEnv<'_>, notes: &mut ExpandNotes) -> Vec<Field> {
    let opts = options();
    let mut out = Vec::new();
    for w in brace_expand(raw, &opts) {
        match w {
            Some(word) => match brush_parser::word::parse(&word, &opts) {
                // An expansion the grammar did not recognise (`${a~~}`) is left as text
                // starting with `$`: bash would expand it, so its value is unknown.
                Ok(pieces) if pieces.iter().any(|p| matches!(&p.piece, WordPiece::Text(t) if t.ends_with('$') || t.contains("${"))) => {
                    notes.unparseable = true;
                    out.push(Field::unknown());
                }
                Ok(pieces) => {
                    let fields = expand_pieces(&pieces, env, notes);
                    // Values too large to be a command or a path (`x=$x$x` doubled many times)
                    // are unknown: bounded work, never empty.
                    if fields.iter().map(|f| f.parts.iter().map(|p| match p { Part::Lit { text, .. } => text.len(), Part::Unknown => 1 }).sum::<usize>()).sum::<usize>() > MAX_VALUE_BYTES {
                        out.push(Field::unknown());
                    } else {
                        out.extend(fields);
                    }
                }
                Err(_) => {
                    notes.unparseable = true;
                    out.push(Field::unknown());
                }
            },
            None => out.push(Field::unknown()),
        }
    }
    out
}

/// Whether `raw` is a word the shell expands to itself: not empty, within
/// [`MAX_VALUE_BYTES`], made only of characters that start no expansion, quote, escape,
/// brace, tilde or extended pattern (letters, digits, `_./,:@%+-=`, and the pattern
/// characters `*` and `?`). Most words of a command line are such words; they need no parse.
fn is_plain(raw: &str) -> bool {
    !raw.is_empty()
        && raw.len() <= MAX_VALUE_BYTES
        && raw
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_./,:@%+-=*?".contains(&b))
}

/// Brace expansion on the raw text; `None` entries stand for words too many to list.
fn brace_expand(raw: &str, opts: &ParserOptions) -> Vec<Option<String>> {
    if !raw.contains('{') {
        return vec![Some(raw.to_string())];
    }
    match brush_parser::word::parse_brace_expansions(raw, opts) {
        Ok(Some(items)) => {
            let mut acc = vec![String::new()];
            if !expand_brace_items(&items, &mut acc, zero_padded(raw)) {
                return vec![None];
            }
            acc.into_iter().map(Some).collect()
        }
        _ => vec![Some(raw.to_string())],
    }
}

/// Whether a number in `raw` is written with a leading zero where a brace sequence bound
/// may be (`{01..10}`, `{1..010}`): bash pads such a sequence (`01 02 …`), which the parsed
/// bounds no longer say.
fn zero_padded(raw: &str) -> bool {
    let b = raw.as_bytes();
    (0..b.len().saturating_sub(1)).any(|i| {
        let before = |k: usize| k.checked_sub(1).map(|k| b[k]);
        let bound_start = match before(i) {
            Some(b'{') | Some(b'.') => true,
            Some(b'-') => matches!(before(i - 1), Some(b'{') | Some(b'.')),
            _ => false,
        };
        b[i] == b'0' && b[i + 1].is_ascii_digit() && bound_start
    })
}

/// Expands brace items into `acc`; `false` when the words are too many to list or cannot
/// be known (a zero-padded number sequence when `padded`).
fn expand_brace_items(
    items: &[BraceExpressionOrText],
    acc: &mut Vec<String>,
    padded: bool,
) -> bool {
    for item in items {
        match item {
            BraceExpressionOrText::Text(t) => {
                for a in acc.iter_mut() {
                    a.push_str(t);
                }
            }
            BraceExpressionOrText::Expr(members) => {
                let mut alts: Vec<String> = Vec::new();
                for m in members {
                    match m {
                        BraceExpressionMember::Child(children) => {
                            let mut sub = vec![String::new()];
                            if !expand_brace_items(children, &mut sub, padded) {
                                return false;
                            }
                            alts.extend(sub);
                        }
                        BraceExpressionMember::NumberSequence {
                            start,
                            end,
                            increment,
                        } => {
                            if padded {
                                return false;
                            }
                            let step = increment.unsigned_abs().max(1);
                            let count = start.abs_diff(*end) / step + 1;
                            if count > MAX_BRACE_WORDS as u64 {
                                return false;
                            }
                            let mut v = *start;
                            for _ in 0..count {
                                alts.push(v.to_string());
                                v = if start <= end {
                                    v.saturating_add(step as i64)
                                } else {
                                    v.saturating_sub(step as i64)
                                };
                            }
                        }
                        BraceExpressionMember::CharSequence {
                            start,
                            end,
                            increment,
                        } => {
                            let (a, b) = (*start as u32, *end as u32);
                            let step = increment.unsigned_abs().max(1) as u32;
                            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                            let mut c = lo;
                            while c <= hi {
                                if let Some(ch) = char::from_u32(c) {
                                    alts.push(ch.to_string());
                                }
                                if alts.len() > MAX_BRACE_WORDS {
                                    return false;
                                }
                                c += step;
                            }
                        }
                    }
                }
                let mut next = Vec::with_capacity(acc.len() * alts.len().max(1));
                for a in acc.iter() {
                    for alt in &alts {
                        next.push(format!("{a}{alt}"));
                    }
                }
                if next.len() > MAX_BRACE_WORDS {
                    return false;
                }
                *acc = next;
            }
        }
    }
    true
}

/// Expands parsed pieces of one word into fields, splitting unquoted known expansion values
/// on the default IFS.
fn expand_pieces(
    pieces: &[WordPieceWithSource],
    env: &ExpandEnv<'_>,
    notes: &mut ExpandNotes,
) -> Vec<Field> {
    let ifs = ifs_of(env);
    // Each alternative is a list of fields under construction; variables with several possible
    // values multiply the alternatives.
    let mut alts: Vec<Vec<Field>> = vec![vec![Field::default()]];
    for p in pieces {
        let values = piece_values(&p.piece, env, notes, false);
        let mut next = Vec::new();
        for fields in &alts {
            for v in &values {
                let mut f = fields.clone();
                apply_value(&mut f, v, &ifs);
                next.push(f);
            }
        }
        if next.len() > MAX_BRACE_WORDS {
            // Too many combinations to list: one unknown field (never empty, never green).
            return vec![Field::unknown()];
        }
        alts = next;
    }
    let mut out = Vec::new();
    let several = alts.len() > 1;
    for fields in alts {
        for f in fields {
            // Unquoted expansions that split to nothing leave no field (`rm -rf$IFS x`).
            if !f.parts.is_empty() || f.forced {
                out.push(f);
            }
        }
    }
    // The fields of one value are the command's words, repeats and all (`"$@"` of `cp a a
    // b`); the union of several values' fields is a set.
    if several {
        dedup(&mut out);
    }
    out
}

/// The field separators: `IFS` when the line assigned it one literal, the default (space, tab,
/// newline) when it did not; `None` when it may hold several values, which makes every unquoted
/// expansion unknown.
fn ifs_of(env: &ExpandEnv<'_>) -> Option<String> {
    match env.vars.get("IFS").map(Vec::as_slice) {
        Some([Some(v)]) => Some(v.clone()),
        Some(_) => None,
        None => Some(" \t\n".to_string()),
    }
}

fn dedup(v: &mut Vec<Field>) {
    let mut seen: Vec<Field> = Vec::new();
    v.retain(|f| {
        if seen.contains(f) {
            false
        } else {
            seen.push(f.clone());
            true
        }
    });
}

/// A value a piece contributes.
#[derive(Debug, Clone)]
pub(super) enum Val {
    /// Literal text from the word itself (no splitting).
    Text { text: String, quoted: bool },
    /// A known value from an expansion: split on IFS when unquoted.
    Expanded { text: String, quoted: bool },
    /// Unknown value.
    Unknown,
    /// Quoted empty: forces a field to exist (`""`).
    EmptyQuoted,
    /// Expands to nothing at all (`"$@"` with no positional parameters).
    Nothing,
    /// Already split into pieces (nested double quotes).
    Seq(Vec<Val>),
    /// Separate fields, not split further (`"$@"`): the first joins the field before it, the
    /// last the text after it.
    Fields(Vec<String>),
}

fn apply_value(fields: &mut Vec<Field>, v: &Val, ifs: &Option<String>) {
    match v {
        Val::Text { text, quoted } => {
            if let Some(f) = fields.last_mut() {
                f.push_lit(text, !quoted);
                f.forced |= *quoted;
            }
        }
        Val::EmptyQuoted => {
            if let Some(f) = fields.last_mut() {
                f.forced = true;
            }
        }
        Val::Nothing => {}
        Val::Unknown => {
            if let Some(f) = fields.last_mut() {
                f.push_unknown();
            }
        }
        Val::Expanded { text, quoted: true } => {
            if let Some(f) = fields.last_mut() {
                f.push_lit(text, false);
                f.forced = true;
            }
        }
        Val::Expanded {
            text,
            quoted: false,
        } => {
            // Word splitting on IFS (bash(1) "Word Splitting"); empty pieces are dropped.
            let Some(ifs) = ifs else {
                if let Some(f) = fields.last_mut() {
                    f.push_unknown();
                }
                return;
            };
            let is_sep = |c: char| ifs.contains(c);
            let starts_sep = text.starts_with(is_sep);
            for (i, chunk) in text.split(is_sep).filter(|c| !c.is_empty()).enumerate() {
                if (i > 0 || starts_sep)
                    && fields
                        .last()
                        .is_some_and(|f| !f.parts.is_empty() || f.forced)
                {
                    fields.push(Field::default());
                }
                if let Some(f) = fields.last_mut() {
                    f.push_lit(chunk, true);
                }
            }
            if text.ends_with(is_sep)
                && fields
                    .last()
                    .is_some_and(|f| !f.parts.is_empty() || f.forced)
            {
                fields.push(Field::default());
            }
        }
        Val::Seq(vs) => {
            for x in vs {
                apply_value(fields, x, ifs);
            }
        }
        Val::Fields(ws) => {
            for (i, w) in ws.iter().enumerate() {
                if i > 0 {
                    fields.push(Field::default());
                }
                if let Some(f) = fields.last_mut() {
                    f.push_lit(w, false);
                    f.forced = true;
                }
            }
        }
    }
}

/// The possible values of one piece (several when a variable has several possible values).
fn piece_values(
    piece: &WordPiece,
    env: &ExpandEnv<'_>,
    notes: &mut ExpandNotes,
    quoted: bool,
) -> Vec<Val> {
    match piece {
        WordPiece::Text(t) => vec![Val::Text {
            text: t.clone(),
            quoted,
        }],
        WordPiece::SingleQuotedText(t) => {
            if t.is_empty() {
                vec![Val::EmptyQuoted]
            } else {
                vec![Val::Text {
                    text: t.clone(),
                    quoted: true,
                }]
            }
        }
        WordPiece::AnsiCQuotedText(t) => {
            // Bytes that are no UTF-8 text name nothing the classifier can look at.
            let Some(s) = decode_ansi_c(t) else {
                return vec![Val::Unknown];
            };
            if s.is_empty() {
                vec![Val::EmptyQuoted]
            } else {
                vec![Val::Text {
                    text: s,
                    quoted: true,
                }]
            }
        }
        WordPiece::EscapeSequence(s) => {
            let text = s.strip_prefix('\\').unwrap_or(s);
            if quoted {
                // Inside double quotes a backslash only escapes $ ` " \ and newline.
                if text.starts_with(['$', '`', '"', '\\']) {
                    vec![Val::Text {
                        text: text.to_string(),
                        quoted: true,
                    }]
                } else if text == "\n" {
                    vec![Val::Nothing]
                } else {
                    vec![Val::Text {
                        text: s.clone(),
                        quoted: true,
                    }]
                }
            } else if text == "\n" {
                vec![Val::Nothing]
            } else {
                vec![Val::Text {
                    text: text.to_string(),
                    quoted: true,
                }]
            }
        }
        WordPiece::DoubleQuotedSequence(inner) | WordPiece::GettextDoubleQuotedSequence(inner) => {
            // Combine the inner pieces' alternatives.
            let mut alts: Vec<Vec<Val>> = vec![vec![Val::EmptyQuoted]];
            for p in inner {
                let vs = piece_values(&p.piece, env, notes, true);
                let mut next = Vec::new();
                for a in &alts {
                    for v in &vs {
                        let mut a2 = a.clone();
                        a2.push(v.clone());
                        next.push(a2);
                    }
                }
                if next.len() > MAX_BRACE_WORDS {
                    return vec![Val::Unknown];
                }
                alts = next;
            }
            alts.into_iter()
                .map(|alt| {
                    // `"$@"` with no positional parameters, alone in its quotes, is no field
                    // (bash(1) "Special Parameters"); other text in the quotes keeps one.
                    let only_empty_params = alt
                        .iter()
                        .skip(1)
                        .all(|v| matches!(v, Val::Fields(ws) if ws.is_empty()))
                        && alt.len() > 1;
                    if only_empty_params {
                        Val::Nothing
                    } else {
                        Val::Seq(alt)
                    }
                })
                .collect()
        }
        // A directory whose path is no UTF-8 text is unknown as a word.
        WordPiece::TildeExpansion(t) => match tilde(t, env).as_deref().and_then(Path::to_str) {
            Some(p) => vec![Val::Text {
                text: p.to_string(),
                quoted: true,
            }],
            None => vec![Val::Unknown],
        },
        WordPiece::ParameterExpansion(expr) => parameter_values(expr, env, notes, quoted),
        WordPiece::CommandSubstitution(s) | WordPiece::BackquotedCommandSubstitution(s) => {
            notes.substitutions.push(s.clone());
            vec![Val::Unknown]
        }
        WordPiece::ArithmeticExpression(e) => {
            if e.value.contains(['$', '`']) {
                // `$(( a[$(cmd)] ))` runs cmd: analyse the text as a word.
                let inner = format!("\"{}\"", e.value.replace('"', "\\\""));
                let _ = expand(&inner, env, notes);
            }
            vec![Val::Unknown]
        }
    }
}

fn tilde(t: &TildeExpr, env: &ExpandEnv<'_>) -> Option<PathBuf> {
    match t {
        TildeExpr::Home => env.home.map(Path::to_path_buf),
        TildeExpr::UserHome(user) => user_home(user),
        TildeExpr::WorkingDir => env.cwd.map(Path::to_path_buf),
        TildeExpr::OldWorkingDir => env.oldpwd.map(Path::to_path_buf),
        _ => None,
    }
}

/// Home directory of a user from `/etc/passwd` (path resolution is the policy's only I/O).
fn user_home(user: &str) -> Option<PathBuf> {
    let text = std::fs::read_to_string("/etc/passwd").ok()?;
    text.lines().find_map(|l| {
        let mut it = l.split(':');
        (it.next()? == user).then(|| it.nth(4).map(PathBuf::from))?
    })
}

#[cfg(test)]
#[path = "words_tests.rs"]
mod tests;
