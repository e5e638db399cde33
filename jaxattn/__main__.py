"""``python -m jaxattn``: the command line."""

from jaxattn.cli import main

if __name__ == "__main__":
    main()
