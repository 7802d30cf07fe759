# slidewin's image: the CLI, and PySpark's own Spark (bin/spark-class) for the master and the
# workers of docker-compose.yml. Java 17 runs Spark 4.
FROM python:3.11-slim

RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/slidewin
COPY pyproject.toml README.md ./
COPY client ./client
COPY db ./db
COPY ingest ./ingest
COPY jobs ./jobs
COPY procedures ./procedures
COPY slidewin ./slidewin
RUN pip install --no-cache-dir .

# spark-class and the jars come with the pyspark wheel
ENV SPARK_HOME=/usr/local/lib/python3.11/site-packages/pyspark
ENV PATH="${SPARK_HOME}/bin:${PATH}" \
    SLIDEWIN_DATA_DIR=/data/slidewin \
    PYTHONUNBUFFERED=1
CMD ["slidewin", "--help"]
