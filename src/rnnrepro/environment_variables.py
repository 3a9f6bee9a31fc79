"""The environment variables the project's processes pass each other: a leaf module (it imports nothing of
the package), so the workflow, the jobs and the trainer read one name each from one place."""

# the training device of a job (rnnrepro.runtime: the workflow sets it from the run config's `device`)
DEVICE_ENV = "RNNREPRO_DEVICE"
# The commit of the code, where the working tree is a copy without its own history (train.common.git_sha).
GIT_SHA_ENV = "RNNREPRO_GIT_SHA"
