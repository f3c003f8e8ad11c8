//! Accepted steering at the graph boundary: a message or a new goal the
//! model must consider is merged, then routed to the model node
//! (`Command::Goto`); a command for a child run is delivered to it; a
//! branch/fan-out outcome becomes `Command::Fork`.

use tinyagents::graph::{to_command, update, BoundaryAction, Branch, Command, HarnessOutcome, MODEL_NODE};
use tinyagents::harness::message::Message;
use tinyagents::harness::steering::{SteeringAction, SteeringCommand};

fn accepted(action: SteeringAction) -> BoundaryAction {
    to_command(HarnessOutcome::SteeringAccepted(SteeringCommand::new("s1", action)))
}

fn goto_model_after(action: SteeringAction) -> Option<(String, Vec<String>)> {
    match accepted(action) {
        BoundaryAction::Command(Command::UpdateThen { update, then }) => match *then {
            Command::Goto(node) => Some((node, update.keys().cloned().collect())),
            _ => None,
        },
        _ => None,
    }
}

#[test]
fn an_injected_message_is_merged_then_goes_to_the_model_node() {
    let routed = goto_model_after(SteeringAction::InjectMessage {
        message: Message::user("also update the docs"),
    });
    assert_eq!(routed, Some((MODEL_NODE.to_owned(), vec!["messages".to_owned()])));
}

#[test]
fn a_redirect_is_merged_then_goes_to_the_model_node() {
    let routed = goto_model_after(SteeringAction::Redirect {
        goal: "fix the failing test first".into(),
    });
    assert_eq!(routed, Some((MODEL_NODE.to_owned(), vec!["goal".to_owned()])));
}

#[test]
fn a_pause_and_a_cancel_keep_their_commands() {
    assert!(matches!(
        accepted(SteeringAction::Pause {
            reason: "review".into()
        }),
        BoundaryAction::Command(Command::Interrupt { .. })
    ));
    assert_eq!(
        accepted(SteeringAction::Resume),
        BoundaryAction::Command(Command::Continue)
    );
}

#[test]
fn a_fan_out_becomes_a_fork() {
    let branches = vec![
        Branch::new("review_a"),
        Branch::new("review_b").with_input(update([("file", "b.rs".into())])),
    ];
    assert_eq!(
        to_command(HarnessOutcome::FanOut(branches.clone())),
        BoundaryAction::Command(Command::Fork(branches))
    );
}
