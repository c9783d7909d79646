//! Feature gates as people write them in flags: `--feature-gates NAME=BOOL[,NAME=BOOL…]`, the
//! syntax of every Kubernetes component. One parser serves `kube-gc run` (`WatchListClient`),
//! the simulated API server (`WatchList`) and `loadgen record` (`WatchListClient`); each names the
//! gates it knows and their defaults, and a gate it does not know is refused, as a component
//! refuses one, rather than ignored.

use std::collections::BTreeMap;

/// Gates a program knows, each with its value when the flag does not set it.
pub type Known = &'static [(&'static str, bool)];

/// The value of every known gate after the flag.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeatureGates {
    values: BTreeMap<&'static str, bool>,
}

impl FeatureGates {
    /// Every gate of `known` at its default.
    pub fn defaults(known: Known) -> FeatureGates {
        FeatureGates {
            values: known.iter().copied().collect(),
        }
    }

    /// Parses `NAME=BOOL` pairs separated by commas over the defaults of `known`. The error is the
    /// message a Kubernetes component gives, for clap to print after the flag's name.
    pub fn parse(text: &str, known: Known) -> Result<FeatureGates, String> {
        let mut gates = FeatureGates::defaults(known);
        for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, value) = pair
                .split_once('=')
                .ok_or_else(|| format!("missing bool value for {pair}"))?;
            let value: bool = value
                .parse()
                .map_err(|_| format!("invalid value of {name}: {value}, err: not a boolean"))?;
            let Some(gate) = gates.values.get_mut(name) else {
                let names: Vec<&str> = known.iter().map(|(name, _)| *name).collect();
                return Err(format!(
                    "unrecognized feature gate: {name} (known: {})",
                    names.join(", ")
                ));
            };
            *gate = value;
        }
        Ok(gates)
    }

    /// Whether gate `name` is on.
    ///
    /// # Panics
    ///
    /// When `name` is not a gate the program declared: that is a bug in the program, not in its
    /// flags.
    pub fn enabled(&self, name: &str) -> bool {
        *self
            .values
            .get(name)
            .unwrap_or_else(|| panic!("feature gate {name} was never declared"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KNOWN: Known = &[("WatchList", true), ("Other", false)];

    #[test]
    fn gates_should_keep_their_defaults_unless_the_flag_sets_them() {
        let gates = FeatureGates::parse("", KNOWN).unwrap();
        assert!(gates.enabled("WatchList"));
        assert!(!gates.enabled("Other"));
        let gates = FeatureGates::parse("WatchList=false, Other=true", KNOWN).unwrap();
        assert!(!gates.enabled("WatchList"));
        assert!(gates.enabled("Other"));
    }

    #[test]
    fn bad_gates_should_be_refused_with_the_message_a_component_gives() {
        let cases = [
            ("WatchList", "missing bool value for WatchList"),
            (
                "WatchList=maybe",
                "invalid value of WatchList: maybe, err: not a boolean",
            ),
            ("Nope=true", "unrecognized feature gate: Nope (known: WatchList, Other)"),
        ];
        for (text, message) in cases {
            assert_eq!(FeatureGates::parse(text, KNOWN), Err(message.to_string()), "{text}");
        }
    }
}
