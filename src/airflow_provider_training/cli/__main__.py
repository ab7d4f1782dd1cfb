import sys

from airflow_provider_training.cli.main import main

sys.exit(main())
