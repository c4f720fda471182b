"""Which of torch's routes a shortcut check runs the learner's code without, and which a stage's own worker
runs without (grader.runner.routes): where none of a stage's functions may take a route, and no stand-in
needs it, the stage's worker runs without it and its shortcut checks need no worker of their own."""

from grader.runner.route_names import STAND_IN_KERNEL, SwitchedOff

# torch's attention computes a softmax inside (of scores x against a key of ones)
SOFTMAX_OFF = SwitchedOff(("softmax", "attention"))
ATTENTION_OFF = SwitchedOff(("attention",))
SOLVERS_OFF = SwitchedOff(("solvers", "attention"))
# For code that calls the learner's stage 6, whose stand-in computes with this kernel: what calling torch's own
# would gain, the import of stage 6 gives already.
ATTENTION_OFF_BUT_STAND_IN = SwitchedOff(("attention",), kept=(STAND_IN_KERNEL,))

# No stage's functions may call torch's attention. Stages 7 and 8 may call the learner's stage 6, whose stand-in
# computes with torch's math kernel.
SWITCHED_OFF_BY_STAGE = {
    1: ATTENTION_OFF,
    2: ATTENTION_OFF,
    3: SOLVERS_OFF,
    4: ATTENTION_OFF,
    5: ATTENTION_OFF,
    6: ATTENTION_OFF,
    7: ATTENTION_OFF_BUT_STAND_IN,
    8: ATTENTION_OFF_BUT_STAND_IN,
}
# Stage 1 may call torch.softmax outside softmax_naive: every check of softmax_naive runs where it is switched
# off, not only the shortcut check, so that code which tells the two workers apart (and calls torch's softmax
# where it is on) is never graded on what torch computed.
SWITCHED_OFF_BY_TARGET = {(1, "softmax_naive"): SOFTMAX_OFF}
# No stage's worker takes torch's attention: the zygote switches it off once, before it forks any of them
# (what each worker switches off itself costs it a few milliseconds and some thousand copied pages).
SWITCHED_OFF_EVERYWHERE = ATTENTION_OFF_BUT_STAND_IN
