"""Where a score is decided: Jest's answer read as evidence (jest.py) and the verdict on a workspace
(verify.py: green, tampered, regressed). The in-sandbox half, the runner and the guard, is JavaScript
in harness/sandbox/image/recipe/runner/.
"""
