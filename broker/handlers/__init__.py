"""One module per API: validate, reshape, call the replica manager or metadata; never touch files."""
