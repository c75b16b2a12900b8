"""The Docker engine: a workspace is a container on a per-instance volume.

``backend`` (``DockerBackend``: create, adopt, fork, delete), ``workspace``
(one container and its executor channel: attach or direct), ``attach`` and
``direct`` (the two ways to reach the executor), ``disk`` (per-workspace
ext4 images on loop devices), ``runtimes`` (runc, runsc as the engine has
them), ``settings``.
"""
