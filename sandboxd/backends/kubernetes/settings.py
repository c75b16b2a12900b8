"""The Kubernetes backend's settings (``SANDBOXD_*``, composed into the daemon's ``Settings``)."""

from __future__ import annotations

from pydantic import Field

from sandboxd.backends.shared.settings import ContainerSettings


class KubernetesSettings(ContainerSettings):
    kubeconfig: str = Field(
        "",
        description="kubernetes backend: the kubeconfig file to reach the API server with; "
        "empty: the in-cluster service account, else $KUBECONFIG",
    )
    kube_namespace: str = Field(
        "",
        pattern=r"^([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)?$",
        description="kubernetes backend: the Kubernetes namespace of the Pods and claims; "
        "empty: the service account's namespace in a cluster, else the kubeconfig "
        "context's, else `default`",
    )
    kube_storage_class: str = Field(
        "",
        description="kubernetes backend: StorageClass of the workspace claims (empty: the "
        "cluster's default); forks clone a claim, so it should support PVC dataSource",
    )
    kube_gvisor_runtime_class: str = Field(
        "gvisor", description="kubernetes backend: the RuntimeClass `runtime: runsc` maps to"
    )
    kube_image_pull_policy: str = Field(
        "IfNotPresent",
        pattern=r"^(Always|IfNotPresent|Never)$",
        description="kubernetes backend: imagePullPolicy of the workspace Pods",
    )
    kube_pool_size: int = Field(
        0,
        ge=0,
        le=64,
        description="kubernetes backend: warm Pods (each with its claim) kept ready for "
        "default-option creates (0: off); the pool grows towards kube_pool_max while creates "
        "come in bursts",
    )
    kube_pool_max: int = Field(
        8,
        ge=0,
        le=64,
        description="kubernetes backend: most warm Pods the pool grows to under demand (as "
        "many as were claimed in the last 5 minutes)",
    )
