// Command sealer runs the sealer service and its operator commands.
//
//	sealer serve          run the service (flags or SEALER_* variables)
//	sealer check-config   validate the configuration without serving
//	sealer keygen         write a new key file, or add a version to one
//	sealer inspect        print the public header of a requestState
//	sealer version        print the version
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/mcp-sealer/sealer/internal/version"
	"github.com/mcp-sealer/sealer/keys"
	"github.com/mcp-sealer/sealer/sealer"
	"github.com/mcp-sealer/sealer/server"
)

const usage = `usage: sealer <command> [flags]
       sealer [serve flags]          (no command: serve)

commands:
  serve          run the sealer (the default command; sealer serve --help for its flags)
  check-config   validate flags, SEALER_* variables, tenants file and key source, without serving
  keygen         write a new key file, or add a version to one (rotation)
  inspect        print the public header of a requestState
  version        print the version (also: sealer --version)

Every command takes -h or --help.
`

// gcPercent is the default GOGC. A sealer's live heap is small and nearly all
// of its garbage is per call (request, state and payload buffers), so at Go's
// default of 100 it collects every few hundred calls: collecting at 4x the
// live heap instead of 1x gave 30% to 50% more Seal+Open pairs per second
// (BENCHMARKS.md, "Runtime") for about 15 MiB more memory. GOGC, when set,
// still decides.
const gcPercent = 400

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
	case err != nil:
		fmt.Fprintln(os.Stderr, "sealer:", err)
		os.Exit(1)
	}
}

// commands are the sealer's commands, by name.
var commands = map[string]func(args []string, stdout, stderr io.Writer) error{
	"serve":        serve,
	"check-config": checkConfig,
	"keygen":       keygen,
	"inspect":      inspect,
	"version":      printVersion,
}

// run runs the command args name. Help, asked for anywhere, is printed on
// stdout and returns flag.ErrHelp: exit 0, nothing done.
func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return serve(nil, stdout, stderr)
	}
	switch a := args[0]; {
	case a == "-h" || a == "-help" || a == "--help" || a == "help" || a == "-version" || a == "--version":
	case strings.HasPrefix(a, "-"):
		// Flags without a command are serve's: sealer --grpc-addr ...
		return serve(args, stdout, stderr)
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		if cmd, ok := commands[at(args, 1)]; ok { // sealer help keygen
			return cmd([]string{"--help"}, stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return flag.ErrHelp
	case "-version", "--version":
		return printVersion(nil, stdout, stderr)
	}
	cmd, ok := commands[args[0]]
	if !ok {
		return fmt.Errorf("unknown command %q\n%s", args[0], usage)
	}
	return cmd(args[1:], stdout, stderr)
}

// isHelp reports whether an argument asks for help.
func isHelp(arg string) bool { return arg == "-h" || arg == "-help" || arg == "--help" }

// at returns args[i], or "" past its end.
func at(args []string, i int) string {
	if i < len(args) {
		return args[i]
	}
	return ""
}

// newFlags returns the flag set of a command whose help is the usage line,
// then text, then the flags; -h and --help print it on stdout.
func newFlags(name, usageLine, text string, stdout io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // parse errors are returned, not printed
	fs.Usage = func() {
		fmt.Fprintf(stdout, "usage: sealer %s\n\n%s", usageLine, text)
		n := 0
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 {
			fmt.Fprintln(stdout, "\nflags:")
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			fs.SetOutput(io.Discard)
		}
	}
	return fs
}

// parse parses args, refusing positional arguments beyond want. Errors other
// than help go to stderr with the usage line.
func parse(fs *flag.FlagSet, args []string, want int) error {
	help := fs.Usage
	fs.Usage = func() {} // the flag package calls it on every error; only help prints it
	err := fs.Parse(args)
	fs.Usage = help
	if err == nil && slices.ContainsFunc(fs.Args(), isHelp) {
		err = flag.ErrHelp // asked for after the arguments, or after --
	}
	if errors.Is(err, flag.ErrHelp) {
		help()
		return flag.ErrHelp
	}
	if err != nil {
		return fmt.Errorf("%s: %v (sealer %s --help)", fs.Name(), err, fs.Name())
	}
	if fs.NArg() != want {
		return fmt.Errorf("%s: want %d argument(s), got %d (sealer %s --help)", fs.Name(), want, fs.NArg(), fs.Name())
	}
	return nil
}

func keygen(args []string, stdout, _ io.Writer) error {
	fs := newFlags("keygen", "keygen [--add] PATH", `Without --add, writes a new key file at PATH (mode 0600) holding one random version;
it never overwrites a file. With --add, adds a random version to the key file at
PATH, created now: every replica reading the file opens with it at once and seals
with it once it is --key-activation old.
`, stdout)
	add := fs.Bool("add", false, "add a version to an existing key file (rotation)")
	if err := parse(fs, args, 1); err != nil {
		return err
	}
	if *add {
		v, err := keys.AddVersion(fs.Arg(0), time.Now())
		if err == nil {
			fmt.Fprintf(stdout, "added key version %d; it seals once it is --key-activation old\n", v)
		}
		return err
	}
	return keys.GenerateFile(fs.Arg(0), time.Now())
}

func inspect(args []string, stdout, _ io.Writer) error {
	fs := newFlags("inspect", "inspect STATE", `Prints the public header of a requestState: format version, key version, state id.
It opens nothing and needs no key.
`, stdout)
	if err := parse(fs, args, 1); err != nil {
		return err
	}
	h, err := sealer.Inspect(fs.Arg(0))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "version %d\nkey version %d\nstate id %s\n", h.Version, h.KeyVersion, h.ID)
	return nil
}

func printVersion(args []string, stdout, _ io.Writer) error {
	fs := newFlags("version", "version", "Prints the module version and VCS commit of this build.\n", stdout)
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	fmt.Fprintln(stdout, version.Get())
	return nil
}

// serveContext is the context serve runs in: until SIGINT or SIGTERM.
// Tests replace it.
var serveContext = func() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
}

// serve runs the sealer until SIGINT or SIGTERM.
func serve(args []string, stdout, stderr io.Writer) error {
	cfg, log, err := config("serve", "serve [flags]", "Runs the sealer. Every flag can also be set by its SEALER_* variable.\n", args, stdout, stderr)
	if err != nil {
		return err
	}
	cfg.Logger = log
	// The data directory is logged at start as an absolute path, so that
	// nobody has to guess where the key file and the ledger went.
	if abs, err := filepath.Abs(cfg.DataDir); err == nil {
		cfg.DataDir = abs
	}
	ctx, stop := serveContext()
	defer stop()
	return server.Run(ctx, cfg)
}

// checkConfig validates a serve configuration without serving.
func checkConfig(args []string, stdout, stderr io.Writer) error {
	cfg, _, err := config("check-config", "check-config [serve flags]", `Validates what serve would run with (its flags and SEALER_* variables): the flags,
the TLS files, the tenants file, and one load of the key source (a Vault login and
read included). Serves nothing, writes nothing. Exits 0, or 1 with every problem.
`, args, stdout, stderr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, w := range cfg.Warnings() {
		fmt.Fprintln(stdout, "warning:", w)
	}
	ctx = server.WithCheckNotes(ctx, func(line string) { fmt.Fprintln(stdout, line) })
	if err := server.Check(ctx, cfg); err != nil {
		return fmt.Errorf("configuration refused:\n%v", err)
	}
	fmt.Fprintln(stdout, "configuration ok")
	return nil
}

// config turns serve's flags and SEALER_* variables into a server.Config and
// a logger.
func config(name, usageLine, text string, args []string, stdout, stderr io.Writer) (server.Config, *slog.Logger, error) {
	cfg := server.Defaults()
	fs := newFlags(name, usageLine, text, stdout)
	logFormat, logLevel := defineServeFlags(fs, &cfg)
	fs.Usage = func() { printServeUsage(stdout, usageLine, text, fs) }
	if err := parse(fs, args, 0); err != nil {
		return cfg, nil, err
	}
	if err := fromEnv(fs); err != nil {
		return cfg, nil, err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return cfg, nil, fmt.Errorf("log-level: %v", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch *logFormat {
	case "text":
		return cfg, slog.New(slog.NewTextHandler(stderr, opts)), nil
	case "json":
		return cfg, slog.New(slog.NewJSONHandler(stderr, opts)), nil
	}
	return cfg, nil, fmt.Errorf("log-format %q: want text or json", *logFormat)
}
