// Command devdb runs a throwaway Postgres in a container (testcontainers-go) for `make run` on a
// machine with Docker and no local Postgres. It prints the database URL on one line of standard
// output once the database accepts connections, and removes the container when it receives
// SIGINT or SIGTERM. The image is RECKON_DEV_PG_IMAGE, else RECKON_TEST_PG_IMAGE, else
// postgres:15-alpine.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "devdb:", err)
		os.Exit(1)
	}
}

func run() error {
	image := firstSet(os.Getenv("RECKON_DEV_PG_IMAGE"), os.Getenv("RECKON_TEST_PG_IMAGE"), "postgres:15-alpine")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	ctr, err := tcpostgres.Run(ctx, image, tcpostgres.WithDatabase("reckon"), tcpostgres.BasicWaitStrategies())
	if ctr != nil {
		defer func() {
			cleanup, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := ctr.Terminate(cleanup); err != nil {
				fmt.Fprintln(os.Stderr, "devdb: remove container:", err)
			}
		}()
	}
	if err != nil {
		return fmt.Errorf("start postgres container %s: %w", image, err)
	}
	url, err := ctr.ConnectionString(ctx, "sslmode=disable")
	if err != nil {
		return fmt.Errorf("connection string: %w", err)
	}
	fmt.Println(url)
	<-ctx.Done()
	return nil
}

func firstSet(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}
