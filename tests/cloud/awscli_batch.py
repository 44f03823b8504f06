#!/usr/bin/python3
"""Runs many AWS CLI commands in one Python process, for test_cloud_awscli.

Starting Debian's awscli costs seconds per command; its driver, built once, checks each further
command in milliseconds. Reads a JSON list of argument lists (without the leading "aws"), runs
each through awscli's own command-line driver with the given global arguments, and prints a JSON
list of {"exit_code", "output"} in the same order. Usage: awscli_batch.py COMMANDS.json
"""
import contextlib
import io
import json
import sys

from awscli.clidriver import create_clidriver


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        commands = json.load(f)
    driver = create_clidriver()
    results = []
    for argv in commands:
        captured = io.StringIO()
        with contextlib.redirect_stderr(captured), contextlib.redirect_stdout(captured):
            try:
                code = driver.main(argv)
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else 1
        results.append({"exit_code": code, "output": captured.getvalue()})
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
