//! Properties of [`finalize`], run on the pure function directly (no async, no models): every
//! combination of gate outcome, budget, session state and stage answers the generators reach.

use proptest::prelude::*;

use super::*;
use crate::decision::Tier;

const MARKER: &str = "MODEL-WRITTEN-TEXT";

fn call() -> PendingCall {
    PendingCall { id: "c1".to_owned(), name: "Tool".to_owned(), input: serde_json::Map::new(), annotations: None }
}

fn outcome(action: GateAction, hard_deny: bool, model_may_allow: bool, veto_only: bool) -> GateOutcome {
    let mut outcome = GateOutcome::unfinished("Tool");
    outcome.action = action;
    outcome.hard_deny = hard_deny && action == GateAction::Deny;
    outcome.model_may_allow = model_may_allow;
    outcome.veto_only = veto_only;
    outcome.tier = Tier::Medium;
    outcome
}

fn action() -> impl Strategy<Value = GateAction> {
    prop_oneof![Just(GateAction::Allow), Just(GateAction::Classify), Just(GateAction::Ask), Just(GateAction::Deny)]
}

fn budget() -> impl Strategy<Value = Budget> {
    prop_oneof![
        Just(Budget::NotCharged),
        Just(Budget::Charged),
        Just(Budget::Exhausted { session: "s".to_owned(), per_session: 3 }),
        Just(Budget::Unreadable { session: "s".to_owned(), kind: "timeout" }),
    ]
}

/// A stage record as a model (or its failure) could leave it, with model-written text in every
/// free-text field.
fn stage_record() -> impl Strategy<Value = StageRecord> {
    let choice = prop_oneof![
        Just(None),
        Just(Some("allow".to_owned())),
        Just(Some("escalate".to_owned())),
        Just(Some("deny_exfiltration".to_owned())),
        Just(Some(MARKER.to_owned())),
    ];
    let error_kind = prop_oneof![
        3 => Just(None),
        1 => Just(Some(ModelError::TIMEOUT_KIND.to_owned())),
        1 => Just(Some(ModelError::BUSY_KIND.to_owned())),
        1 => Just(Some("malformed".to_owned())),
    ];
    (choice, proptest::option::of(0.0..=1.0f64), error_kind).prop_map(|(choice, p_allow, error_kind)| StageRecord {
        model: "m".to_owned(),
        choice,
        p_allow,
        reasoning: Some(MARKER.to_owned()),
        error: error_kind.as_ref().map(|_| MARKER.to_owned()),
        error_kind,
        ..StageRecord::default()
    })
}

fn option() -> impl Strategy<Value = Option<String>> {
    let mut options: Vec<Just<Option<String>>> =
        crate::classifier::questions::VERDICT_OPTIONS.iter().map(|option| Just(Some(option.id.to_owned()))).collect();
    options.push(Just(None));
    options.push(Just(Some(MARKER.to_owned())));
    proptest::strategy::Union::new(options)
}

/// A review's answer and the settings it is read by.
type ReviewAnswer = (StageRecord, Option<String>, OnError, OnDeny);

#[derive(Clone, Debug)]
enum Evidence {
    NotConfigured,
    SessionUnreadable,
    SessionLocked,
    OverCallLimit,
    ServiceBusy,
    TimedOut,
    Judged { screen: Option<Box<(StageRecord, f64, bool)>>, review: Option<Box<ReviewAnswer>> },
}

fn evidence() -> impl Strategy<Value = Evidence> {
    let on_error = prop_oneof![Just(OnError::Ask), Just(OnError::Deny)];
    let on_deny = prop_oneof![Just(OnDeny::Deny), Just(OnDeny::Ask)];
    let screen = proptest::option::of((stage_record(), 0.5..=1.0f64, any::<bool>()));
    let review = proptest::option::of((stage_record(), option(), on_error, on_deny));
    prop_oneof![
        1 => Just(Evidence::NotConfigured),
        1 => Just(Evidence::SessionUnreadable),
        1 => Just(Evidence::SessionLocked),
        1 => Just(Evidence::OverCallLimit),
        1 => Just(Evidence::ServiceBusy),
        1 => Just(Evidence::TimedOut),
        6 => (screen, review).prop_map(|(screen, review)| Evidence::Judged {
            screen: screen.map(Box::new),
            review: review.map(Box::new),
        }),
    ]
}

fn classifier(evidence: &Evidence) -> Classifier<'_> {
    match evidence {
        Evidence::NotConfigured => Classifier::NotConfigured,
        Evidence::SessionUnreadable => Classifier::SessionUnreadable { kind: "unreachable" },
        Evidence::SessionLocked => Classifier::SessionLocked,
        Evidence::OverCallLimit => Classifier::OverCallLimit { limit: 8, stage: Stage::Screen },
        Evidence::ServiceBusy => Classifier::ServiceBusy { stage: Stage::Review },
        Evidence::TimedOut => Classifier::TimedOut,
        Evidence::Judged { screen, review } => Classifier::Judged {
            screen: screen.as_deref().map(|(record, threshold, reports_probabilities)| Screened {
                record,
                threshold: *threshold,
                reports_probabilities: *reports_probabilities,
            }),
            review: review.as_deref().map(|(record, option, on_error, on_deny)| Reviewed {
                record,
                option: option.as_deref(),
                on_error: *on_error,
                on_deny: *on_deny,
            }),
        },
    }
}

/// Whether the stages' answers show a model allowed this call: the screen cleared it, or the
/// review chose `allow`.
fn a_model_allowed(evidence: &Evidence) -> bool {
    let Evidence::Judged { screen, review } = evidence else { return false };
    let cleared = screen.as_deref().is_some_and(|(record, threshold, reports)| {
        record.error_kind.is_none() && screen_allows(record.choice.as_deref(), record.p_allow, *threshold, *reports)
    });
    cleared || review.as_deref().is_some_and(|(_, option, _, _)| option.as_deref() == Some(ALLOW))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    /// Fail closed and strictest wins: an `allow` needs the gate's allow (with the budget
    /// paid), or the gate's `classify` with the budget paid and a model's allow on a call a
    /// model may allow. Nothing loosens a gate `ask` or `deny`; a hard deny stays `deny`.
    #[test]
    fn allow_only_with_proof(
        action in action(),
        hard_deny in any::<bool>(),
        model_may_allow in any::<bool>(),
        veto_only in any::<bool>(),
        budget in budget(),
        evidence in evidence(),
    ) {
        let gate = outcome(action, hard_deny, model_may_allow, veto_only);
        let decision = finalize(&call(), &gate, &budget, &classifier(&evidence));
        let budget_paid = budget.refusal().is_none();
        if decision.decision == Decision::Allow {
            let gate_proved = action == GateAction::Allow && budget_paid;
            let model_proved = action == GateAction::Classify && budget_paid && model_may_allow && a_model_allowed(&evidence);
            prop_assert!(gate_proved || model_proved, "{decision:?}");
        }
        match action {
            GateAction::Deny => prop_assert_eq!(decision.decision, Decision::Deny),
            GateAction::Ask => prop_assert_eq!(decision.decision, Decision::Ask),
            _ if !budget_paid => prop_assert_eq!(decision.decision, Decision::Ask),
            _ => {}
        }
        if action != GateAction::Classify || !budget_paid {
            // The gate (or the budget) settled it: no model stage is named.
            prop_assert_eq!(decision.stage, Stage::Gate);
        }
        prop_assert!(decision.reason_code.is_some());
    }

    /// What the agent sees is never model text: no free-text field of a stage record, and no
    /// option outside the verdict's set, reaches the reason.
    #[test]
    fn no_model_text_reaches_the_agent(
        action in action(),
        model_may_allow in any::<bool>(),
        veto_only in any::<bool>(),
        budget in budget(),
        evidence in evidence(),
    ) {
        let gate = outcome(action, false, model_may_allow, veto_only);
        let decision = finalize(&call(), &gate, &budget, &classifier(&evidence));
        prop_assert!(!decision.reason.as_deref().unwrap_or_default().contains(MARKER));
        // An `ask` or `deny` always says why; an `allow` carries no sentence.
        prop_assert_eq!(decision.reason.is_none(), decision.decision == Decision::Allow);
    }

    /// A review deny option denies, unless `reviewer` mode (veto only) or `on_deny = "ask"`
    /// makes it a question; either way it counts toward the session's denial limits.
    #[test]
    fn review_denials_deny_or_ask_and_are_counted(
        veto_only in any::<bool>(),
        on_deny in prop_oneof![Just(OnDeny::Deny), Just(OnDeny::Ask)],
        denial in proptest::sample::select(ReasonCode::REVIEW_DENIALS.to_vec()),
        record in stage_record(),
    ) {
        let gate = outcome(GateAction::Classify, false, true, veto_only);
        let review = Reviewed { record: &record, option: Some(denial.as_str()), on_error: OnError::Ask, on_deny };
        let decision = finalize(&call(), &gate, &Budget::Charged, &Classifier::Judged { screen: None, review: Some(review) });
        let expected = if veto_only || on_deny == OnDeny::Ask { Decision::Ask } else { Decision::Deny };
        prop_assert_eq!(decision.decision, expected);
        prop_assert_eq!(decision.reason_code, Some(denial));
        prop_assert_eq!(session_update(&decision), Some(SessionUpdate::ClassifierDenied));
    }

    /// Session updates follow from the decision alone: a model's allow ends the denial streak,
    /// nothing else does.
    #[test]
    fn a_model_allow_and_only_that_resets_the_streak(
        action in action(),
        model_may_allow in any::<bool>(),
        budget in budget(),
        evidence in evidence(),
    ) {
        let gate = outcome(action, false, model_may_allow, false);
        let decision = finalize(&call(), &gate, &budget, &classifier(&evidence));
        let model_allowed = decision.decision == Decision::Allow && decision.stage != Stage::Gate;
        prop_assert_eq!(session_update(&decision) == Some(SessionUpdate::ClassifierAllowed), model_allowed);
    }
}

#[test]
fn every_arm_names_its_reason() {
    let classify = outcome(GateAction::Classify, false, true, false);
    let irreversible = outcome(GateAction::Classify, false, false, false);
    let screen_record =
        StageRecord { choice: Some("escalate".to_owned()), p_allow: Some(0.2), ..StageRecord::default() };
    let cleared = StageRecord { choice: Some("allow".to_owned()), p_allow: Some(0.99), ..StageRecord::default() };
    let busy = StageRecord { error_kind: Some(ModelError::BUSY_KIND.to_owned()), ..StageRecord::default() };
    let timed_out = StageRecord { error_kind: Some(ModelError::TIMEOUT_KIND.to_owned()), ..StageRecord::default() };
    let screened = |record| Some(Screened { record, threshold: 0.9, reports_probabilities: true });
    let reviewed = |record, option| Some(Reviewed { record, option, on_error: OnError::Deny, on_deny: OnDeny::Deny });
    let cases: Vec<(&GateOutcome, Budget, Classifier<'_>, Decision, ReasonCode, Stage)> = vec![
        (
            &classify,
            Budget::NotCharged,
            Classifier::NotConfigured,
            Decision::Ask,
            ReasonCode::NoClassifier,
            Stage::Gate,
        ),
        (
            &classify,
            Budget::Exhausted { session: "s".into(), per_session: 1 },
            Classifier::TimedOut,
            Decision::Ask,
            ReasonCode::CostlyBudgetExhausted,
            Stage::Gate,
        ),
        (
            &classify,
            Budget::Unreadable { session: "s".into(), kind: "timeout" },
            Classifier::TimedOut,
            Decision::Ask,
            ReasonCode::SessionStoreUnavailable,
            Stage::Gate,
        ),
        (
            &classify,
            Budget::Charged,
            Classifier::SessionUnreadable { kind: "refused" },
            Decision::Ask,
            ReasonCode::SessionStoreUnavailable,
            Stage::Session,
        ),
        (
            &classify,
            Budget::Charged,
            Classifier::SessionLocked,
            Decision::Ask,
            ReasonCode::SessionDenialLimit,
            Stage::Session,
        ),
        (
            &classify,
            Budget::Charged,
            Classifier::OverCallLimit { limit: 2, stage: Stage::Review },
            Decision::Ask,
            ReasonCode::ModelCallLimit,
            Stage::Review,
        ),
        (
            &classify,
            Budget::Charged,
            Classifier::ServiceBusy { stage: Stage::Screen },
            Decision::Ask,
            ReasonCode::ModelBusy,
            Stage::Screen,
        ),
        (&classify, Budget::Charged, Classifier::TimedOut, Decision::Ask, ReasonCode::DecisionTimeout, Stage::Timeout),
        (
            &classify,
            Budget::Charged,
            Classifier::Judged { screen: screened(&cleared), review: None },
            Decision::Allow,
            ReasonCode::ScreenAllow,
            Stage::Screen,
        ),
        (
            &irreversible,
            Budget::Charged,
            Classifier::Judged { screen: screened(&cleared), review: None },
            Decision::Ask,
            ReasonCode::Irreversible,
            Stage::Screen,
        ),
        (
            &classify,
            Budget::Charged,
            Classifier::Judged { screen: screened(&busy), review: reviewed(&cleared, Some("allow")) },
            Decision::Ask,
            ReasonCode::ModelBusy,
            Stage::Screen,
        ),
        (
            &classify,
            Budget::Charged,
            Classifier::Judged { screen: screened(&timed_out), review: None },
            Decision::Ask,
            ReasonCode::ScreenTimeout,
            Stage::Screen,
        ),
        (
            &classify,
            Budget::Charged,
            Classifier::Judged { screen: screened(&screen_record), review: None },
            Decision::Ask,
            ReasonCode::NoReviewModel,
            Stage::Screen,
        ),
        (
            &classify,
            Budget::Charged,
            Classifier::Judged { screen: screened(&screen_record), review: reviewed(&screen_record, Some("allow")) },
            Decision::Allow,
            ReasonCode::ReviewAllow,
            Stage::Review,
        ),
        (
            &irreversible,
            Budget::Charged,
            Classifier::Judged { screen: None, review: reviewed(&screen_record, Some("allow")) },
            Decision::Ask,
            ReasonCode::Irreversible,
            Stage::Review,
        ),
        (
            &classify,
            Budget::Charged,
            Classifier::Judged { screen: None, review: reviewed(&busy, None) },
            Decision::Deny,
            ReasonCode::ModelBusy,
            Stage::Review,
        ),
        (
            &classify,
            Budget::Charged,
            Classifier::Judged { screen: None, review: reviewed(&timed_out, None) },
            Decision::Deny,
            ReasonCode::ReviewError,
            Stage::Review,
        ),
        (
            &classify,
            Budget::Charged,
            Classifier::Judged { screen: None, review: reviewed(&screen_record, Some("deny_destructive")) },
            Decision::Deny,
            ReasonCode::DenyDestructive,
            Stage::Review,
        ),
    ];
    for (gate, budget, classifier, decision, code, stage) in cases {
        let decided = finalize(&call(), gate, &budget, &classifier);
        assert_eq!(
            (decided.decision, decided.reason_code, decided.stage),
            (decision, Some(code), stage),
            "{classifier:?}"
        );
        assert_eq!(decided.reason.is_some(), decision != Decision::Allow, "{classifier:?}");
    }
}
