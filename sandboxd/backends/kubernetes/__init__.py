"""The Kubernetes backend: one Pod and one PersistentVolumeClaim per instance.

``backend`` implements ``WorkspaceBackend``; ``workspace`` one instance's
Pod and its executor channel; ``api`` the API server (REST, kubeconfig or
the in-cluster service account); ``stream`` exec and attach over WebSocket
``v5.channel.k8s.io``; ``manifests`` the Pod and claim sandboxd makes;
``relay`` the small program exec runs to reach the executor's socket.
"""
