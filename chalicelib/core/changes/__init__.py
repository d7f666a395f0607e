"""Change events (docs/design.md, "Change events"): one CloudEvents event per audit entry
(events), a warehouse's sinks (event_sinks), sending to SQS, SNS, EventBridge or a webhook
(event_senders), the dispatcher that delivers each sink its events in order (dispatcher), and the
pull feed (event_feed). It reads the audit trail (primitives/) and warehouse records (containers/),
and no table module."""
