"""Validates a HAR file against the strict HAR 1.2 schema beside this file.
Exit 0 when valid; otherwise prints every error with its JSON path."""
import json
import pathlib
import sys

import jsonschema

schema = json.loads((pathlib.Path(__file__).parent / "har-1.2.schema.json").read_text())
document = json.loads(pathlib.Path(sys.argv[1]).read_text())
validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
errors = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
for error in errors:
    print("/".join(str(p) for p in error.absolute_path) + ": " + error.message)
sys.exit(1 if errors else 0)
