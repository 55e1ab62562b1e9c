"""One module per `plan` subcommand."""
