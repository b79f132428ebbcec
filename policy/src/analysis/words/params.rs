//! Parameter expansions: a name's known values, and each `${…}` form's (defaults,
//! assignments, lengths, pattern removals, case changes, transformations), per bash(1)
//! "Parameter Expansion".

use super::*;

pub(super) fn param_name(p: &Parameter) -> Option<&str> {
    match p {
        Parameter::Named(n) => Some(n.as_str()),
        _ => None,
    }
}

/// Values of a plain parameter reference.
pub(super) fn param_lookup(
    p: &Parameter,
    indirect: bool,
    env: &ExpandEnv<'_>,
    quoted: bool,
) -> Vec<Val> {
    if indirect {
        return vec![Val::Unknown];
    }
    match p {
        Parameter::Named(n) => {
            if let Some(vals) = env.vars.get(n) {
                return vals
                    .iter()
                    .map(|v| match v {
                        Some(s) if s.is_empty() && quoted => Val::EmptyQuoted,
                        Some(s) if s.is_empty() => Val::Nothing,
                        Some(s) => Val::Expanded {
                            text: s.clone(),
                            quoted,
                        },
                        None => Val::Unknown,
                    })
                    .collect();
            }
            match n.as_str() {
                "HOME" =>
                // A directory whose path is no UTF-8 text is no value a word can hold.
                {
                    match env.home.and_then(|h| h.to_str()) {
                        Some(h) => vec![Val::Expanded {
                            text: h.to_string(),
                            quoted,
                        }],
                        None => vec![Val::Unknown],
                    }
                }
                // Default IFS, unless assigned on the line (handled above).
                "IFS" => vec![Val::Expanded {
                    text: " \t\n".to_string(),
                    quoted,
                }],
                "PWD" =>
                // A directory whose path is no UTF-8 text is no value a word can hold.
                {
                    match env.cwd.and_then(|c| c.to_str()) {
                        Some(c) => vec![Val::Expanded {
                            text: c.to_string(),
                            quoted,
                        }],
                        None => vec![Val::Unknown],
                    }
                }
                _ => vec![Val::Unknown],
            }
        }
        // Arrays are kept as their elements joined by spaces; `${a[@]}` splits them again.
        Parameter::NamedWithAllIndices { name, .. } | Parameter::NamedWithIndex { name, .. } => {
            match env.vars.get(name) {
                Some(vals) => vals
                    .iter()
                    .map(|v| match v {
                        Some(s) => Val::Expanded {
                            text: s.clone(),
                            quoted: false,
                        },
                        None => Val::Unknown,
                    })
                    .collect(),
                None => vec![Val::Unknown],
            }
        }
        Parameter::Positional(0) => vec![Val::Unknown],
        // Set on the line (`set -- WORDS`, `shift`): every list they may be.
        Parameter::Special(SpecialParameter::AllPositionalParameters { concatenate })
            if env.params.is_some() =>
        {
            let lists = env.params.unwrap_or_default();
            lists
                .iter()
                .map(|l| match l {
                    None => Val::Unknown,
                    Some(words) if quoted && !concatenate => Val::Fields(words.clone()),
                    Some(words) if words.is_empty() => Val::Nothing,
                    // `"$*"` joins with the first character of IFS (a space unless assigned);
                    // unquoted, both split again.
                    Some(words) => Val::Expanded {
                        text: words.join(" "),
                        quoted,
                    },
                })
                .collect()
        }
        Parameter::Special(SpecialParameter::PositionalParameterCount) if env.params.is_some() => {
            let lists = env.params.unwrap_or_default();
            lists
                .iter()
                .map(|l| match l {
                    Some(words) => Val::Expanded {
                        text: words.len().to_string(),
                        quoted,
                    },
                    None => Val::Unknown,
                })
                .collect()
        }
        Parameter::Positional(n) if env.params.is_some() => {
            let lists = env.params.unwrap_or_default();
            let i = usize::try_from(*n).ok().and_then(|n| n.checked_sub(1));
            lists
                .iter()
                .map(|l| match (l, i) {
                    (Some(words), Some(i)) => match words.get(i) {
                        Some(w) if !w.is_empty() => Val::Expanded {
                            text: w.clone(),
                            quoted,
                        },
                        _ if quoted => Val::EmptyQuoted,
                        _ => Val::Nothing,
                    },
                    _ => Val::Unknown,
                })
                .collect()
        }
        // An agent's line runs as `bash -c LINE`: no positional parameters. `"$@"` is then no
        // field at all, even quoted; `"$*"` one empty field.
        Parameter::Special(SpecialParameter::AllPositionalParameters { concatenate }) => {
            if quoted && !concatenate {
                vec![Val::Fields(Vec::new())]
            } else if quoted {
                vec![Val::EmptyQuoted]
            } else {
                vec![Val::Nothing]
            }
        }
        Parameter::Special(SpecialParameter::PositionalParameterCount) => {
            vec![Val::Expanded {
                text: "0".to_string(),
                quoted,
            }]
        }
        Parameter::Positional(_) => vec![Val::Nothing, Val::Unknown],
        _ => vec![Val::Unknown],
    }
}

pub(super) fn parameter_values(
    expr: &ParameterExpr,
    env: &ExpandEnv<'_>,
    notes: &mut ExpandNotes,
    quoted: bool,
) -> Vec<Val> {
    let word_values = |w: &Option<String>, notes: &mut ExpandNotes| -> Vec<Val> {
        let Some(w) = w else {
            return vec![Val::EmptyQuoted];
        };
        let fields = expand(w, env, notes);
        if fields.is_empty() {
            return vec![Val::Nothing];
        }
        fields
            .into_iter()
            .map(|f| match f.known() {
                Some(s) => Val::Expanded { text: s, quoted },
                None => Val::Unknown,
            })
            .collect()
    };
    if let Some(Parameter::NamedWithIndex { index, .. }) = parameter_of(expr) {
        notes.arith.push(index.clone());
    }
    match expr {
        ParameterExpr::Substring { offset, length, .. } => {
            notes.arith.push(offset.value.clone());
            if let Some(l) = length {
                notes.arith.push(l.value.clone());
            }
        }
        ParameterExpr::ReplaceSubstring { pattern, .. } => notes.arith.push(pattern.clone()),
        // `${a@P}` expands the value like a prompt: its `$(…)` run.
        ParameterExpr::Transform {
            parameter: Parameter::Named(n),
            op: brush_parser::word::ParameterTransformOp::PromptExpand,
            ..
        } => match env.vars.get(n) {
            Some(vals) => {
                for v in vals {
                    match v {
                        Some(text) => notes.prompt_code.push(text.clone()),
                        None => notes.dynamic_code = true,
                    }
                }
            }
            None => notes.dynamic_code = true,
        },
        ParameterExpr::RemoveSmallestSuffixPattern {
            pattern: Some(p), ..
        }
        | ParameterExpr::RemoveLargestSuffixPattern {
            pattern: Some(p), ..
        }
        | ParameterExpr::RemoveSmallestPrefixPattern {
            pattern: Some(p), ..
        }
        | ParameterExpr::RemoveLargestPrefixPattern {
            pattern: Some(p), ..
        } => notes.arith.push(p.clone()),
        _ => {}
    }
    if let ParameterExpr::AssignDefaultValues {
        parameter: Parameter::Named(n) | Parameter::NamedWithIndex { name: n, .. },
        ..
    } = expr
    {
        notes.assigned.push(n.clone());
    }
    match expr {
        ParameterExpr::Parameter {
            parameter,
            indirect,
        } => {
            if *indirect {
                notes.dynamic = true;
            }
            param_lookup(parameter, *indirect, env, quoted)
        }
        ParameterExpr::UseDefaultValues {
            parameter,
            indirect,
            default_value,
            ..
        }
        | ParameterExpr::AssignDefaultValues {
            parameter,
            indirect,
            default_value,
            ..
        } => {
            if matches!(expr, ParameterExpr::AssignDefaultValues { .. }) {
                notes.dynamic = true;
            }
            let mut v = param_lookup(parameter, *indirect, env, quoted);
            let known_set = param_name(parameter).is_some_and(|n| {
                env.vars.get(n).is_some_and(|vals| {
                    vals.iter()
                        .all(|x| x.as_ref().is_some_and(|s| !s.is_empty()))
                })
            });
            if !known_set {
                v.extend(word_values(default_value, notes));
            }
            v
        }
        ParameterExpr::UseAlternativeValue {
            parameter,
            indirect,
            alternative_value,
            ..
        } => {
            let mut v = param_lookup(parameter, *indirect, env, quoted);
            v.retain(|x| !matches!(x, Val::Expanded { .. }));
            v.push(Val::Nothing);
            v.extend(word_values(alternative_value, notes));
            v
        }
        ParameterExpr::IndicateErrorIfNullOrUnset {
            parameter,
            indirect,
            ..
        } => param_lookup(parameter, *indirect, env, quoted),
        // `${@:OFFSET[:LENGTH]}` of parameters set on the line, literal numbers only.
        ParameterExpr::Substring {
            parameter: Parameter::Special(SpecialParameter::AllPositionalParameters { concatenate }),
            offset,
            length,
            ..
        } if env.params.is_some() => {
            let number = |t: &str| t.trim().parse::<i64>().ok();
            let off = number(&offset.value);
            let len = match length {
                Some(l) => number(&l.value).map(Some),
                None => Some(None),
            };
            let lists = env.params.unwrap_or_default();
            lists
                .iter()
                .map(|l| {
                    let (Some(words), Some(off), Some(len)) = (l, off, len) else {
                        return Val::Unknown;
                    };
                    // Offset 0 starts at `$0`, which is not known; a negative one counts
                    // from the end; a negative length is an error for `@`.
                    let n = words.len() as i64;
                    let start = match off {
                        0 => return Val::Unknown,
                        o if o > 0 => o - 1,
                        o => n + o,
                    };
                    if start < 0 || len.is_some_and(|l| l < 0) {
                        return Val::Unknown;
                    }
                    let start = (start as usize).min(words.len());
                    let end = match len {
                        Some(l) => (start + l as usize).min(words.len()),
                        None => words.len(),
                    };
                    let slice = words[start..end].to_vec();
                    if quoted && !concatenate {
                        Val::Fields(slice)
                    } else if slice.is_empty() {
                        if quoted {
                            Val::EmptyQuoted
                        } else {
                            Val::Nothing
                        }
                    } else {
                        Val::Expanded {
                            text: slice.join(" "),
                            quoted,
                        }
                    }
                })
                .collect()
        }
        _ => vec![Val::Unknown],
    }
}

/// The parameter an expansion expression refers to.
pub(super) fn parameter_of(expr: &ParameterExpr) -> Option<&Parameter> {
    Some(match expr {
        ParameterExpr::Parameter { parameter, .. }
        | ParameterExpr::UseDefaultValues { parameter, .. }
        | ParameterExpr::AssignDefaultValues { parameter, .. }
        | ParameterExpr::IndicateErrorIfNullOrUnset { parameter, .. }
        | ParameterExpr::UseAlternativeValue { parameter, .. }
        | ParameterExpr::ParameterLength { parameter, .. }
        | ParameterExpr::RemoveSmallestSuffixPattern { parameter, .. }
        | ParameterExpr::RemoveLargestSuffixPattern { parameter, .. }
        | ParameterExpr::RemoveSmallestPrefixPattern { parameter, .. }
        | ParameterExpr::RemoveLargestPrefixPattern { parameter, .. }
        | ParameterExpr::Substring { parameter, .. }
        | ParameterExpr::Transform { parameter, .. }
        | ParameterExpr::UppercaseFirstChar { parameter, .. }
        | ParameterExpr::UppercasePattern { parameter, .. }
        | ParameterExpr::LowercaseFirstChar { parameter, .. }
        | ParameterExpr::LowercasePattern { parameter, .. } => parameter,
        _ => return None,
    })
}
