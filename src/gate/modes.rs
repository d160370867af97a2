//! The four modes: how a tier becomes an action (BRIEF.md's table).
//!
//! Decides only the tier → action mapping; never looks at arguments. `critical` is `deny` in
//! every mode, including `approve-all-dangerous`.

use crate::config::Mode;
use crate::decision::{GateAction, Tier};

/// The action a mode takes for a tier. Medium-tier calls reach here already raised to `high`
/// when any path lies outside the workspace, so `auto`'s "medium inside the workspace" holds.
pub fn action_for(mode: Mode, tier: Tier) -> GateAction {
    match (mode, tier) {
        // Catastrophic calls are never run unattended, whatever the mode.
        (_, Tier::Critical) => GateAction::Deny,
        // `human`: only read-only calls run alone.
        (Mode::Human, Tier::Low) => GateAction::Allow,
        (Mode::Human, Tier::Medium | Tier::High) => GateAction::Ask,
        // `auto`: reads and in-workspace writes run; the classifier judges the rest.
        (Mode::Auto, Tier::Low | Tier::Medium) => GateAction::Allow,
        (Mode::Auto, Tier::High) => GateAction::Classify,
        // `reviewer`: the classifier may only veto read-only calls; everything else asks.
        (Mode::Reviewer, Tier::Low) => GateAction::Classify,
        (Mode::Reviewer, Tier::Medium | Tier::High) => GateAction::Ask,
        // `approve-all-dangerous`: test rigs only.
        (Mode::ApproveAllDangerous, Tier::Low | Tier::Medium | Tier::High) => GateAction::Allow,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every cell of BRIEF.md's mode table.
    #[test]
    fn mode_by_tier_table() {
        use GateAction::*;
        let table = [
            (Mode::Human, [Allow, Ask, Ask, Deny]),
            (Mode::Auto, [Allow, Allow, Classify, Deny]),
            (Mode::Reviewer, [Classify, Ask, Ask, Deny]),
            (Mode::ApproveAllDangerous, [Allow, Allow, Allow, Deny]),
        ];
        for (mode, expected) in table {
            for (tier, action) in [Tier::Low, Tier::Medium, Tier::High, Tier::Critical].into_iter().zip(expected) {
                assert_eq!(action_for(mode, tier), action, "{mode:?} × {tier:?}");
            }
        }
    }
}
