"""`opscan report`: which ops raise on a torch and a GPU, which switch to a deterministic path, which are silent.

- `matrix`: the rows and the Report they make; the rows the rules data alone
  gives for a torch version; reading a saved report back. No torch.
- `measure`: runs a snippet (a rule's reproducer, its remedy) forward and
  backward in strict and default mode, several times, and compares the bits
  of every op's results between runs. Imports torch.
- `sweep`: the same for torch's own OpInfo samples, ModuleInfo samples and a
  few torchvision ops, under a time limit, resumable. Imports torch.
- `diff`: what changed between two saved reports. No torch.

See docs/report.md.
"""
