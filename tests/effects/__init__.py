"""A sample effect, kept outside the package: `tests/test_adding_an_effect.py` adds it to a
copy of the repository as whoever adds an effect would (its module in `domain/`, its card
in the catalog) and plays it there (`check_spice_glass.py`)."""
