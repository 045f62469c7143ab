"""The client's subcommands of `loopwarden`, one module each; cli.py registers them."""
