package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/events"
	"github.com/reckonhq/reckon/internal/ident"
	"github.com/reckonhq/reckon/internal/jsonx"
)

// eventsUsage is the synopsis of `server events`.
const eventsUsage = `server events tail [-pattern P ...] [-after ID] [-tenant T] [-o table|json]
                                        follow the event stream until SIGINT or SIGTERM: one line per
                                        event, from now (or after ID; -after 0 from the oldest kept)
server events subscriptions ACTION      webhook subscriptions to the event log (docs/api.md):
  list [-tenant T] [-o table|json]      the subscriptions (one tenant's with -tenant)
  create -url U [-tenant T] [-pattern P]… [-secret S] [-o table|json]
                                        POST the matching events to U (every tenant's without -tenant);
                                        prints the signing secret once
  delete ID                             stop delivering and forget it
  pause ID [-reason R]                  stop delivering until resumed
  resume ID                             deliver again, from where it stopped (a failed batch again)

patterns: "*", a category ("turn.*") or a type ("effect.stuck"); -pattern again for more.`

// runEvents is `server events tail` and `server events subscriptions ACTION`.
func runEvents(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "subscriptions" {
		return runEventSubscriptions(ctx, args[1:], stdout)
	}
	return runEventsTail(ctx, args, stdout, stderr)
}

// runEventsTail: server events tail, on the database's credentials (every tenant, or -tenant's).
func runEventsTail(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd, err := newCommand("server events", eventsUsage, args, stdout)
	if err != nil {
		return err
	}
	if cmd.action != "tail" {
		return cmd.unknownAction("events action")
	}
	fs := cmd.fs
	var patterns stringList
	fs.Var(&patterns, "pattern", `event types to follow: "*", "category.*" or "category.name"; repeat for more (default every type)`)
	after := fs.String("after", "", "the event id to follow after (as printed; 0: from the oldest kept); default from now")
	tenant := fs.String("tenant", "", "one tenant's events (default every tenant's)")
	output := outputFlag(fs)
	if err := parse(fs, cmd.args); err != nil {
		return err
	}
	if err := checkOutput(*output); err != nil {
		return err
	}
	filter := events.Filter{Patterns: patterns, Tenant: *tenant}
	if len(patterns) > events.MaxPatterns {
		return fmt.Errorf("%w: -pattern given %d times: at most %d patterns", errUsage, len(patterns), events.MaxPatterns)
	}
	for _, p := range patterns {
		if err := events.ValidatePattern(p); err != nil {
			return fmt.Errorf("%w: -pattern: %s", errUsage, jsonx.SafeText(strings.TrimPrefix(err.Error(), "events: ")))
		}
	}
	if *tenant != "" {
		if err := ident.ValidateTenantID(*tenant); err != nil {
			return fmt.Errorf("%w: -tenant: %s", errUsage, jsonx.SafeText(err.Error()))
		}
	}
	var position events.ID
	if *after != "" {
		if position, err = events.ParseID(*after); err != nil {
			return fmt.Errorf("%w: -after: %s", errUsage, jsonx.SafeText(strings.TrimPrefix(err.Error(), "events: ")))
		}
	}
	return cmd.runParsed(ctx, nil, func(ctx context.Context, pool *pgxpool.Pool) error {
		logger, err := cmd.common.logger()
		if err != nil {
			return err
		}
		// An effects client only for its LISTEN connection, which wakes the subscription when
		// events are written; never started.
		client, err := effects.NewClient(pool, &effects.Config{Registry: effects.NewRegistry(), Logger: logger})
		if err != nil {
			return err
		}
		defer client.Stop(context.WithoutCancel(ctx)) //nolint:errcheck // never started; ends Listen's connection only
		log := events.New(pool, client)
		if *after == "" {
			if position, err = log.Head(ctx); err != nil {
				return fmt.Errorf("read the events' head: %w", err)
			}
		}
		fmt.Fprintf(stderr, "following events after %s (SIGINT or SIGTERM stops)\n", position)
		for ev, err := range log.Subscribe(ctx, filter, position) {
			if errors.Is(err, events.ErrExpired) {
				return fmt.Errorf("-after %s: older than events retention kept, the events after it are gone; start again without -after (from now) or with -after 0 (from the oldest kept)", position)
			}
			if err != nil {
				return err
			}
			if err := printEvent(stdout, ev, *output); err != nil {
				return err
			}
		}
		return nil
	})
}

// printEvent prints ev on one line: as JSON (-o json, the API's data: lines), or as its time, id,
// type, tenant, what it is about and its payload.
func printEvent(w io.Writer, ev events.Event, output string) error {
	if output == "json" {
		enc := json.NewEncoder(w) // one line: no indentation
		enc.SetEscapeHTML(false)
		return enc.Encode(ev)
	}
	var about []string
	if ev.SessionKey != "" {
		about = append(about, "session="+jsonx.SafeText(ev.SessionKey))
	}
	if ev.TurnID != nil {
		about = append(about, "turn="+ev.TurnID.String())
	}
	if ev.EffectID != nil {
		about = append(about, "effect="+ev.EffectID.String())
	}
	if ev.SagaID != nil {
		about = append(about, "saga="+ev.SagaID.String())
	}
	if ev.RunID != "" {
		about = append(about, "run="+jsonx.SafeText(ev.RunID))
	}
	if len(about) == 0 {
		about = append(about, "-")
	}
	_, err := fmt.Fprintf(w, "%s  %s  %s  %s  %s  %s\n", ev.At.UTC().Format(time.RFC3339Nano), ev.ID, ev.Type, ev.Tenant,
		strings.Join(about, " "), ev.Payload)
	return err
}

// runEventSubscriptions is `server events subscriptions list|create|delete|pause|resume`, through
// package events, as the API does.
func runEventSubscriptions(ctx context.Context, args []string, stdout io.Writer) error {
	cmd, err := newCommand("server events subscriptions", eventsUsage, args, stdout)
	if err != nil {
		return err
	}
	fs := cmd.fs
	var output, tenant, url, secret, reason *string
	var patterns stringList
	switch cmd.action {
	case "list":
		tenant = fs.String("tenant", "", "one tenant's subscriptions (default: every one)")
		output = outputFlag(fs)
	case "create":
		url = fs.String("url", "", "where the deliveries are POSTed: http or https (required)")
		tenant = fs.String("tenant", "", "deliver one tenant's events (default: every tenant's)")
		fs.Var(&patterns, "pattern", `an event type pattern ("*", "turn.*", "turn.completed"), repeated; default every type`)
		secret = fs.String("secret", "", "the key of the Reckon-Signature header, 16 to 256 bytes (default: a random one, printed)")
		output = outputFlag(fs)
	case "pause":
		reason = fs.String("reason", "", "why, shown with the subscription (default: paused by the CLI's user)")
	case "delete", "resume":
	default:
		return cmd.unknownAction("events subscriptions action")
	}
	rawID, err := parseWithID(fs, cmd.args, cmd.action != "list" && cmd.action != "create")
	if err != nil {
		return err
	}
	var id uuid.UUID
	if rawID != "" {
		if id, err = uuid.Parse(rawID); err != nil {
			return fmt.Errorf("%w: ID %q is not a UUID", errUsage, jsonx.SafeText(rawID))
		}
	}
	if output != nil {
		if err := checkOutput(*output); err != nil {
			return err
		}
	}
	var in events.NewSubscription
	if cmd.action == "create" {
		in = events.NewSubscription{Tenant: *tenant, URL: *url, Patterns: patterns, Secret: *secret, CreatedBy: "cli:" + cliActor()}
		if err := subscriptionUsageError(in.Validate()); err != nil {
			return err
		}
	}
	return cmd.runParsed(ctx, nil, func(ctx context.Context, pool *pgxpool.Pool) error {
		subs := events.NewSubscriptions(pool)
		var sub *events.Subscription
		var err error
		switch cmd.action {
		case "list":
			list, err := subs.List(ctx, *tenant, &events.ListOpts{Limit: 1000})
			if err != nil {
				return err
			}
			if *output == "json" {
				return printJSON(stdout, list)
			}
			printSubscriptions(stdout, list)
			return nil
		case "create":
			if sub, err = subs.Create(ctx, in); err != nil {
				return subscriptionUsageError(err)
			}
			if *output == "json" {
				return printJSON(stdout, sub)
			}
			printSubscriptions(stdout, []*events.Subscription{sub})
			fmt.Fprintf(stdout, "secret (shown once): %s\n", sub.Secret)
			return nil
		case "delete":
			err = subs.Delete(ctx, "", id)
		case "pause":
			r := *reason
			if r == "" {
				r = "paused by cli:" + cliActor()
			}
			sub, err = subs.Pause(ctx, "", id, r)
		case "resume":
			sub, err = subs.Resume(ctx, "", id)
		}
		if errors.Is(err, events.ErrSubscriptionNotFound) {
			return fmt.Errorf("no subscription %s", id)
		} else if err != nil {
			return subscriptionUsageError(err)
		}
		if sub != nil {
			fmt.Fprintf(stdout, "subscription %s %s\n", id, sub.State)
		} else {
			fmt.Fprintf(stdout, "subscription %s deleted\n", id)
		}
		return nil
	})
}

// subscriptionUsageError makes an *events.SubscriptionError a usage mistake naming its flag.
func subscriptionUsageError(err error) error {
	var bad *events.SubscriptionError
	if !errors.As(err, &bad) {
		return err
	}
	flag := flagOf(bad.Field, map[string]string{"patterns": "-pattern", "created_by": "-actor"})
	return fmt.Errorf("%w: %s %s", errUsage, flag, jsonx.SafeText(bad.Problem))
}

func printSubscriptions(w io.Writer, subs []*events.Subscription) {
	tw := newTable(w, "ID\tTENANT\tURL\tPATTERNS\tSTATE\tPOSITION\tREASON")
	for _, s := range subs {
		tenant := s.Tenant
		if tenant == "" {
			tenant = "(all)"
		}
		patterns := strings.Join(s.Patterns, ",")
		if patterns == "" {
			patterns = "*"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, jsonx.SafeText(tenant), jsonx.SafeText(s.URL), patterns, s.State, s.Position, jsonx.SafeText(s.PausedReason))
	}
	tw.Flush()
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }
