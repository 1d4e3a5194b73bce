"""What runs inside the jobs: the submitter loop, the runner that supervises
the app, the completion hooks, and the rendering of both sbatch scripts."""
