"""`python -m experiments.roofline ...` in a checkout: `nevo roofline` (nevo.roofline)."""

from nevo.roofline.report import main

if __name__ == "__main__":
    main()
